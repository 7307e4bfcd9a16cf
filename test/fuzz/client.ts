/*
 * A small HTTP/1.1 client over raw sockets (TCP or TLS) for the fuzz test: it sends
 * request bytes exactly as generated (NUL, control and non-UTF-8 bytes included, which
 * node:http and fetch refuse to send) and reads the answers itself.
 *
 * Well-framed requests go over a few keep-alive connections, one request at a time on
 * each; requests whose framing is broken on purpose (a Content-Length that lies, a bad
 * request line) get a connection of their own, which is half-closed after the request
 * so the server sees the end, and every answer on it is read until the server closes.
 */
import { connect as tcpConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

export interface Target {
  host: string;
  port: number;
  tls: boolean;
}

/** One answer: its status and head (status line and headers, latin1). */
export interface Answer {
  status: number;
  head: string;
}

/** What one request got: its answers (more than one when broken framing made the server read several), or none when the server closed first. */
export interface Outcome {
  answers: Answer[];
  /** Why no (complete) answer came, when none did: 'closed' or 'timeout'. */
  failure?: 'closed' | 'timeout';
  /** The head of the answer before on the same connection, when the connection was reused. */
  previous?: string;
}

/** The last TLS session per listener, resumed by the next connection (no full handshake per reconnect). */
const sessions = new Map<string, Buffer>();

function open(target: Target): Socket {
  const key = `${target.host}:${target.port}`;
  const socket = target.tls ? tlsConnect({ host: target.host, port: target.port, rejectUnauthorized: false, session: sessions.get(key) }) : tcpConnect(target.port, target.host);
  if (target.tls) socket.on('session', (session: Buffer) => sessions.set(key, session));
  socket.setNoDelay(true);
  return socket;
}

/** Length of a complete chunked body at the start of `buf` (trailers included), or -1 while incomplete. */
function chunkedLength(buf: Buffer): number {
  let at = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', at);
    if (eol === -1) return -1;
    const size = parseInt(buf.subarray(at, eol).toString('latin1'), 16);
    if (Number.isNaN(size)) throw new Error(`bad chunk size ${JSON.stringify(buf.subarray(at, eol).toString('latin1'))}`);
    if (size === 0) {
      // Trailers end at an empty line.
      let t = eol + 2;
      for (;;) {
        const next = buf.indexOf('\r\n', t);
        if (next === -1) return -1;
        if (next === t) return next + 2;
        t = next + 2;
      }
    }
    at = eol + 2 + size + 2;
    if (at > buf.length) return -1;
  }
}

/**
 * Takes one complete answer off the front of `buf`: the answer and how many bytes it
 * used, undefined while incomplete. A body read to the end of the connection is only
 * complete once `ended`.
 */
export function takeAnswer(buf: Buffer, headRequest: boolean, ended: boolean): { answer: Answer; used: number; close: boolean } | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end === -1) return undefined;
  const head = buf.subarray(0, end).toString('latin1');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
  if (m === null) throw new Error(`not an HTTP answer: ${JSON.stringify(head.slice(0, 200))}`);
  const status = Number(m[1]);
  const header = (name: string): string | undefined => new RegExp(`\\r\\n${name}:[ \\t]*([^\\r]*)`, 'i').exec(head)?.[1];
  const close = /^close$/i.test(header('connection') ?? '') || head.startsWith('HTTP/1.0') && !/keep-alive/i.test(header('connection') ?? '');
  const bodyStart = end + 4;
  if (headRequest || status === 204 || status === 304 || (status >= 100 && status < 200)) return { answer: { status, head }, used: bodyStart, close };
  if (/chunked/i.test(header('transfer-encoding') ?? '')) {
    const n = chunkedLength(buf.subarray(bodyStart));
    return n === -1 ? undefined : { answer: { status, head }, used: bodyStart + n, close };
  }
  const cl = header('content-length');
  if (cl !== undefined) {
    const n = Number(cl);
    return buf.length - bodyStart < n ? undefined : { answer: { status, head }, used: bodyStart + n, close };
  }
  return ended ? { answer: { status, head }, used: buf.length, close: true } : undefined;
}

/** A keep-alive connection that carries one request at a time, reopened when the server closes it. */
class Connection {
  private socket: Socket | undefined;
  private buf: Buffer = Buffer.alloc(0);
  private ended = false;
  private wake: (() => void) | undefined;
  private last: string | undefined;

  constructor(private readonly target: Target) {}

  private ensure(): Socket {
    if (this.socket !== undefined && !this.ended) return this.socket;
    const socket = open(this.target);
    this.socket = socket;
    this.buf = Buffer.alloc(0);
    this.ended = false;
    this.last = undefined;
    socket.on('data', (c: Buffer) => {
      if (this.socket !== socket) return;
      this.buf = this.buf.length === 0 ? c : Buffer.concat([this.buf, c]);
      this.wake?.();
    });
    const gone = () => {
      if (this.socket !== socket) return;
      this.ended = true;
      this.wake?.();
    };
    socket.on('end', gone);
    socket.on('close', gone);
    socket.on('error', gone);
    return socket;
  }

  async send(bytes: Buffer, headRequest: boolean, timeoutMs: number): Promise<Outcome> {
    const socket = this.ensure();
    socket.write(bytes);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const got = takeAnswer(this.buf, headRequest, this.ended);
      if (got !== undefined && got.answer.status >= 100 && got.answer.status < 200) {
        this.buf = this.buf.subarray(got.used);
        continue;
      }
      if (got !== undefined) {
        this.buf = this.buf.subarray(got.used);
        if (got.close || this.buf.length > 0) this.drop();
        this.last = got.answer.head;
        return { answers: [got.answer] };
      }
      if (this.ended) {
        const previous = this.last;
        this.drop();
        return { answers: [], failure: 'closed', previous };
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        this.drop();
        return { answers: [], failure: 'timeout' };
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }

  drop(): void {
    this.socket?.destroy();
    this.socket = undefined;
    this.ended = true;
  }
}

/** Sends bytes on a new connection, half-closes it, and reads every answer until the server closes. */
export function sendAlone(target: Target, bytes: Buffer, headRequest: boolean, timeoutMs: number): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = open(target);
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (failure?: 'timeout') => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      let buf: Buffer = Buffer.concat(chunks);
      const answers: Answer[] = [];
      for (;;) {
        const got = takeAnswer(buf, headRequest, true);
        if (got === undefined || got.used === 0) break;
        if (got.answer.status >= 200) answers.push(got.answer);
        buf = buf.subarray(got.used);
        if (buf.length === 0) break;
      }
      resolve(answers.length > 0 ? { answers } : { answers, failure: failure ?? 'closed' });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => finish());
    socket.on('close', () => finish());
    socket.once(target.tls ? 'secureConnect' : 'connect', () => {
      socket.write(bytes);
      socket.end();
    });
  });
}

/** A few keep-alive connections to one listener; `send` waits for a free one. */
export class Pool {
  private readonly idle: Connection[];
  private readonly waiting: ((c: Connection) => void)[] = [];

  constructor(
    readonly target: Target,
    size: number,
  ) {
    this.idle = Array.from({ length: size }, () => new Connection(target));
  }

  async send(bytes: Buffer, headRequest: boolean, timeoutMs: number): Promise<Outcome> {
    const conn = this.idle.pop() ?? (await new Promise<Connection>((resolve) => this.waiting.push(resolve)));
    try {
      const outcome = await conn.send(bytes, headRequest, timeoutMs);
      // A reused connection the server closed after its last answer (as it does after a
      // framing error it answered 400): sent again on a new one, as HTTP clients do.
      if (outcome.failure === 'closed' && outcome.previous !== undefined) return await conn.send(bytes, headRequest, timeoutMs);
      return outcome;
    } finally {
      const next = this.waiting.shift();
      if (next !== undefined) next(conn);
      else this.idle.push(conn);
    }
  }

  close(): void {
    for (const c of this.idle) c.drop();
  }
}
