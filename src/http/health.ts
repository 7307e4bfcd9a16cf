import type { IncomingMessage, ServerResponse } from 'node:http';

/** One dependency a listener's readiness looks at. */
export interface HealthCheck {
  /** Resolves when the dependency works now; rejects saying why not. */
  run(): Promise<void>;
  /**
   * A failing required check makes the listener not ready (503); an optional one (Redis,
   * which sleeve can do without for a while) only makes it `degraded` (still 200).
   */
  required: boolean;
}

export interface HealthLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

type CheckState = 'ok' | 'failing' | 'timeout';

const HEADERS = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' } as const;
/** Longest a readiness check may take; a load balancer's probe timeout is usually a few seconds. */
const CHECK_TIMEOUT_MS = 2000;

/**
 * Liveness and readiness of a process (`GET /healthz`, `GET /readyz` on each listener).
 * Liveness needs nothing but the process. Readiness runs each listener's checks, and
 * answers 503 at once, without checking, from the moment the process starts stopping,
 * so a load balancer stops sending it requests while those in flight finish.
 */
export class Health {
  private stopping = false;

  /** The process is stopping: readiness fails from now on. */
  stop(): void {
    this.stopping = true;
  }

  get isStopping(): boolean {
    return this.stopping;
  }

  /** The probe endpoints of one listener, with that listener's checks. */
  forListener(checks: Record<string, HealthCheck>): ListenerHealth {
    return new ListenerHealth(this, checks);
  }
}

export class ListenerHealth {
  private readonly health: Health;
  private readonly checks: [string, HealthCheck][];
  private readonly states = new Map<string, CheckState>();

  constructor(health: Health, checks: Record<string, HealthCheck>) {
    this.health = health;
    this.checks = Object.entries(checks);
  }

  /** The readiness answer: HTTP status and body. */
  async readiness(log: HealthLog): Promise<{ status: number; body: string }> {
    if (this.health.isStopping) return { status: 503, body: '{"status":"stopping","checks":{}}' };
    const results = await Promise.all(this.checks.map(([name, check]) => this.runCheck(name, check, log)));
    const checks: Record<string, CheckState> = {};
    let status = 'ok';
    for (const [i, [name, check]] of this.checks.entries()) {
      const state = results[i] as CheckState;
      checks[name] = state;
      if (state !== 'ok') status = check.required ? 'unavailable' : status === 'ok' ? 'degraded' : status;
    }
    // A check that finished after stopping began must not make the answer say ready.
    if (this.health.isStopping) return { status: 503, body: '{"status":"stopping","checks":{}}' };
    return { status: status === 'unavailable' ? 503 : 200, body: JSON.stringify({ status, checks }) };
  }

  private async runCheck(name: string, check: HealthCheck, log: HealthLog): Promise<CheckState> {
    let timer: NodeJS.Timeout | undefined;
    let state: CheckState;
    let why: unknown;
    try {
      await Promise.race([
        check.run(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new CheckTimeout()), CHECK_TIMEOUT_MS);
        }),
      ]);
      state = 'ok';
    } catch (err) {
      why = err;
      state = err instanceof CheckTimeout ? 'timeout' : 'failing';
    } finally {
      clearTimeout(timer);
    }
    // The reason goes to the log (once per change), not to whoever asks.
    const before = this.states.get(name) ?? 'ok';
    this.states.set(name, state);
    if (state !== before) {
      if (state === 'ok') log.info({ check: name }, `readiness: ${name} ok again`);
      else log.warn({ check: name, state, err: why }, `readiness: ${name} ${state}`);
    }
    return state;
  }

  /**
   * Answers GET and HEAD of /healthz and /readyz (405 for other methods); returns false
   * for every other request. Called before the rate limit and the response cache.
   */
  answer(req: IncomingMessage, res: ServerResponse, log: HealthLog): boolean {
    const url = req.url ?? '/';
    // The hot path: one cheap test for every other request.
    if (!url.startsWith('/healthz') && !url.startsWith('/readyz')) return false;
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (path !== '/healthz' && path !== '/readyz') return false;
    const send = (status: number, body: string, extra: Record<string, string> = {}) => {
      // The request's id, when the listener gave it one (a header set before is kept by writeHead anyway).
      const id = req.headers['x-request-id'];
      res.writeHead(status, typeof id === 'string' && !res.hasHeader('x-request-id') ? { ...HEADERS, ...extra, 'x-request-id': id } : { ...HEADERS, ...extra });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(405, '{"status":"method not allowed"}', { allow: 'GET, HEAD' });
      return true;
    }
    if (path === '/healthz') {
      send(200, '{"status":"ok"}');
      return true;
    }
    this.readiness(log).then(
      (r) => send(r.status, r.body, this.health.isStopping ? { connection: 'close' } : {}),
      () => send(503, '{"status":"unavailable","checks":{}}'),
    );
    return true;
  }
}

class CheckTimeout extends Error {}
