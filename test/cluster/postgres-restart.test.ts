/*
 * PostgreSQL restarting under load, on a private cluster made for this test (the machine's
 * shared cluster serves other tests at the same time): while it is down, requests fail
 * cleanly (500 with the API's message, never a hang, a crash or a wrong answer such as a
 * 404 for art that exists) and readiness says so; once it is back, the same sleeve process
 * answers correctly again without being restarted.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it, type TestContext } from 'node:test';
import { request } from '../helpers/auth.js';
import { cliInProcess, DIALECT, freePort, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { logLines, startServe, type ServeProcess } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait.js';

const R = 'b0570000-0000-4000-8000-000000000001';
const G = 'b0570000-0000-4000-8000-0000000000aa';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The newest PostgreSQL server binaries of the Debian layout, if any. */
function serverBin(): string | undefined {
  if (!existsSync('/usr/lib/postgresql')) return undefined;
  const versions = readdirSync('/usr/lib/postgresql')
    .filter((v) => existsSync(`/usr/lib/postgresql/${v}/bin/initdb`))
    .sort((x, y) => Number(y) - Number(x));
  return versions[0] === undefined ? undefined : `/usr/lib/postgresql/${versions[0]}/bin`;
}

function skipReason(): string | false {
  if (DIALECT !== 'postgres') return 'runs on the PostgreSQL pass';
  if (process.getuid?.() !== 0) return 'needs root (to run a private cluster as the postgres user)';
  if (serverBin() === undefined) return 'no PostgreSQL server binaries under /usr/lib/postgresql';
  try {
    execFileSync('id', ['-u', 'postgres'], { stdio: 'ignore' });
  } catch {
    return 'no postgres system user';
  }
  return false;
}

/** A private PostgreSQL cluster in a temporary directory, run by the postgres user. */
class PrivateCluster {
  readonly port: number;
  readonly dir: string;
  private readonly bin: string;

  private constructor(dir: string, port: number, bin: string) {
    this.dir = dir;
    this.port = port;
    this.bin = bin;
  }

  static async create(): Promise<PrivateCluster> {
    const bin = serverBin() as string;
    const dir = await mkdtemp(path.join(tmpdir(), 'sleeve-pg-'));
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    await chown(dir, uid, gid);
    const cluster = new PrivateCluster(dir, await freePort(), bin);
    cluster.asPostgres('initdb', ['-D', cluster.data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
    await cluster.start();
    return cluster;
  }

  get data(): string {
    return path.join(this.dir, 'data');
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  private asPostgres(tool: string, args: string[]): void {
    execFileSync('runuser', ['-u', 'postgres', '--', path.join(this.bin, tool), ...args], { stdio: ['ignore', 'ignore', 'pipe'], cwd: this.dir });
  }

  async start(): Promise<void> {
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
    this.asPostgres('pg_ctl', ['-D', this.data, '-o', options, '-l', path.join(this.dir, 'log'), '-w', '-t', '60', 'start']);
  }

  /** Stops it the way a restart does: `fast` ends every session at once. */
  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    this.asPostgres('pg_ctl', ['-D', this.data, '-m', mode, '-w', '-t', '60', 'stop']);
  }

  async destroy(): Promise<void> {
    try {
      await this.stop('immediate');
    } catch {
      // Already stopped.
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}

interface Outcome {
  at: number;
  url: string;
  /** `status location`, `500 <body>`, or the error of a request that got no answer. */
  answer: string;
}

describe(`sleeve serve through a PostgreSQL restart under load (${DIALECT})`, { skip: skipReason() }, () => {
  let cluster: PrivateCluster;
  let t: TestEnv;
  let s: ServeProcess;
  let imageId: string;

  before(async () => {
    cluster = await PrivateCluster.create();
    t = await makeTestEnv({ SLEEVE_DATABASE_URL: cluster.url, SLEEVE_LOG_LEVEL: 'info' });
    await cliInProcess(t.env, ['release', 'add', R, '--release-group', G]);
    const file = path.join(t.dir, 'front.jpg');
    await writeFile(file, await makeJpeg(100, 100));
    imageId = (await cliInProcess(t.env, ['--json', 'art', 'add', R, file, '--type', 'Front'])).id;
    await mkdir(path.join(t.dir, 'files'), { recursive: true });
    s = await startServe(t.env);
  });

  after(async () => {
    const code = await s?.stop();
    await cluster?.destroy();
    await t?.cleanup();
    assert.equal(code, 0, `sleeve stopped cleanly at the end\n${s?.stderr()}`);
  });

  it('fails cleanly while PostgreSQL is down, says it is not ready, and recovers by itself', async (ctx: TestContext) => {
    const dl = `${s.base}/download/mbid-${R}`;
    // What each URL must answer whenever the database is there.
    const expected: Record<string, string> = {
      [`/release/${R}/front`]: `307 ${dl}/mbid-${R}-${imageId}.jpg`,
      [`/release/${R}/${imageId}-250`]: `307 ${dl}/mbid-${R}-${imageId}_thumb250.jpg`,
      [`/release/${R}/`]: `307 ${dl}/index.json`,
      [`/release-group/${G}/front`]: `307 ${dl}/mbid-${R}-${imageId}.jpg`,
      [`/release/${R}/back`]: '404',
      [`/download/mbid-${R}/index.json`]: '200',
    };
    const urls = Object.keys(expected);
    const outcomes: Outcome[] = [];
    let running = true;
    const start = performance.now();
    const worker = async (w: number) => {
      for (let i = w; running; i++) {
        const url = urls[i % urls.length] as string;
        let answer: string;
        try {
          const res = await fetch(`${s.base}${url}`, { redirect: 'manual', signal: AbortSignal.timeout(10_000) });
          const body = await res.text();
          answer = res.status === 500 || res.status === 503 ? `${res.status} ${body}` : `${res.status} ${res.headers.get('location') ?? ''}`.trim();
        } catch (err) {
          answer = `no answer: ${(err as Error).message} ${String((err as { cause?: unknown }).cause ?? '')}`;
        }
        outcomes.push({ at: performance.now() - start, url, answer });
        await sleep(5);
      }
    };
    // The auth listener too: a token request from an unknown client needs the database to be refused.
    const TOKEN = '/oauth2/token (unknown client)';
    expected[TOKEN] = '401 invalid_client';
    const authWorker = async () => {
      while (running) {
        let answer: string;
        try {
          const res = await request(`${s.authBase}/oauth2/token`, { form: { grant_type: 'refresh_token', refresh_token: 'x', client_id: 'nobody', client_secret: 'x' } });
          answer = `${res.status} ${res.json().error}`;
        } catch (err) {
          answer = `no answer: ${(err as Error).message}`;
        }
        outcomes.push({ at: performance.now() - start, url: TOKEN, answer });
        await sleep(5);
      }
    };
    const workers = [...Array.from({ length: 6 }, (_, w) => worker(w)), authWorker()];
    const readiness: { at: number; status: number; body: string }[] = [];
    const probeReady = async () => {
      const res = await fetch(`${s.base}/readyz`, { signal: AbortSignal.timeout(10_000) });
      const r = { at: performance.now() - start, status: res.status, body: await res.text() };
      readiness.push(r);
      return r;
    };

    const failedAt = (from: number) => outcomes.filter((o) => o.at >= from && (o.answer.startsWith('500') || o.answer.startsWith('503')));
    /** Every URL answered as expected at least `n` times since `from` (ms from the start). */
    const allAnswered = (from: number, n: number) => Object.keys(expected).every((url) => outcomes.filter((o) => o.at >= from && o.url === url && o.answer === expected[url]).length >= n);
    const warned = (re: RegExp) => logLines(s).some((l) => l.level >= 40 && re.test(l.msg));
    try {
      // Load first: every URL answered right a few times.
      await waitFor(() => allAnswered(0, 3), { timeoutMs: 15_000, what: 'every URL answered before the outage' });
      const stoppedAt = performance.now() - start;
      await cluster.stop('fast');
      const down = await pollUntil(probeReady, (r) => r.status === 503, 5000);
      assert.equal(down.value.status, 503, 'not ready while the database is down');
      assert.deepEqual(JSON.parse(down.value.body), { status: 'unavailable', checks: { database: 'failing', storage: 'ok' } });
      const authDown = await request(`${s.authBase}/readyz`);
      assert.equal(authDown.status, 503);
      assert.deepEqual(authDown.json(), { status: 'unavailable', checks: { database: 'failing' } });
      // The outage felt on both listeners, and by the catalogue watch.
      await waitFor(() => failedAt(stoppedAt).some((o) => o.url === TOKEN) && failedAt(stoppedAt).some((o) => o.url !== TOKEN) && warned(/catalogue watch: cannot read the catalogue version/), {
        timeoutMs: 15_000,
        what: 'the outage to be felt',
      });
      const restartedAt = performance.now() - start;
      await cluster.start();
      const up = await pollUntil(probeReady, (r) => r.status === 200, 15_000);
      assert.equal(up.value.status, 200, 'ready again once the database is back');
      const readyAt = up.value.at;
      // Then load again: more than 50 requests answered after recovery, every URL among them, and the watch back.
      await waitFor(() => outcomes.filter((o) => o.at > readyAt + 500).length > 50 && allAnswered(readyAt + 500, 2) && logLines(s).some((l) => /catalogue watch: the database answers again/.test(l.msg)), {
        timeoutMs: 15_000,
        what: 'answers after recovery',
      });
      running = false;
      await Promise.all(workers);

      // The token endpoint answers an outage 503 with Retry-After (never a 400 a client would take as final).
      const clean = (o: Outcome) => (o.url === TOKEN ? o.answer === '503 temporarily_unavailable' : /^500 Whoops\. Our bad\.\n$/.test(o.answer));
      const wrong = outcomes.filter((o) => o.answer !== expected[o.url] && !clean(o));
      assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} wrong answers or requests without an answer`);
      const failed = outcomes.filter((o) => o.answer.startsWith('500') || o.answer.startsWith('503'));
      assert.ok(failed.length > 0, 'the outage was felt: some requests failed');
      assert.ok(failed.some((o) => o.url === TOKEN) && failed.some((o) => o.url !== TOKEN), 'on both listeners');
      assert.ok(failed.every((o) => o.at >= stoppedAt - 50 && o.at <= readyAt + 1000), 'failures only during the outage');
      const afterwards = outcomes.filter((o) => o.at > readyAt + 500);
      assert.ok(afterwards.length > 50, `${afterwards.length} requests after recovery`);
      assert.ok(afterwards.every((o) => o.answer === expected[o.url]), 'every request after recovery is answered right');
      ctx.diagnostic(
        `${outcomes.length} requests: ${failed.length} failed cleanly (500, 503) during the outage; ` +
          `stopped at ${Math.round(stoppedAt)} ms, started again at ${Math.round(restartedAt)} ms, ready at ${Math.round(readyAt)} ms`,
      );

      // The process stayed up, and the log says what happened.
      assert.equal(s.child.exitCode, null);
      const warnings = logLines(s).filter((l) => l.level >= 40).map((l) => l.msg);
      assert.ok(warnings.some((m) => /catalogue watch: cannot read the catalogue version/.test(m)), JSON.stringify(warnings));
      assert.ok(warnings.some((m) => /readiness: database failing/.test(m)), JSON.stringify(warnings));
      assert.ok(logLines(s).some((l) => /catalogue watch: the database answers again/.test(l.msg)));
    } finally {
      running = false;
      await Promise.all(workers);
    }
  });

  it('stops cleanly on SIGTERM during an outage, and just after the database returns', async () => {
    const ready = async (p: ServeProcess) => (await fetch(`${p.base}/readyz`, { signal: AbortSignal.timeout(10_000) })).status;
    const during = await startServe(t.env);
    const reconnecting = await startServe(t.env);
    try {
      await cluster.stop('fast');
      for (const p of [during, reconnecting]) await pollUntil(() => ready(p), (status) => status === 503, 10_000);
      // Stopped while the database is away: the pool, the watch and the registration let go at once.
      assert.equal(await during.stop(), 0, `stopped cleanly during the outage\n${during.stderr()}`);
      await waitFor(() => logLines(reconnecting).some((l) => /session for change notifications was lost/.test(l.msg)), { timeoutMs: 15_000, what: 'the session for changes lost' });
      await cluster.start();
      // The database is back; the session for changes reconnects within a second of it: stop about then.
      await pollUntil(() => ready(reconnecting), (status) => status === 200, 15_000);
      assert.equal(await reconnecting.stop(), 0, `stopped cleanly while reconnecting\n${reconnecting.stderr()}`);
    } finally {
      await during.stop('SIGKILL');
      await reconnecting.stop('SIGKILL');
    }
  });
});
