import { STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { writeSync } from 'node:fs';
import type { ConnectionLimits } from '../config/load.js';
import { flatLatin1 } from './flat-string.js';

/**
 * The fast lane: a listener's plainest requests answered straight from the socket, before
 * node:http makes a request and a response object for them (docs/decisions.md, "The fast
 * lane").
 *
 * Node's HTTP server costs about as much per request as everything sleeve does for a file it
 * holds in memory, so a hot thumbnail could not be sent at more than ~0.6 of nginx's rate. The
 * lane reads each connection's bytes first. A request it fully understands (GET or HEAD,
 * HTTP/1.1, a whole head in what has arrived, no body, nothing it does not know how to treat
 * exactly as node:http would; or a POST to a path the listener names, framed by one
 * Content-Length and all of its body arrived with its head) is offered to `answer`, which
 * writes the whole answer at once, or declines, or answers later (the connection then waits
 * for it; docs/decisions.md, "The token endpoint in the fast lane"). At the first request it does not take (anything else, a declined one, a head cut
 * off mid-way), the connection goes to node:http for good, with that request's bytes put back
 * unread: node:http then parses, limits and answers it, and everything after it, as it always
 * has. So the lane only ever answers requests whose grammar and framing leave no room for two
 * readings, and every error answer (400, 408, 431, 505, …) is node:http's own.
 */

/** A request the lane took: lower-case header names, each at most once. */
export interface LaneRequest {
  method: 'GET' | 'HEAD' | 'POST';
  url: string;
  headers: Record<string, string>;
  socket: Socket;
  /** A POST's body, all of it (its Content-Length's bytes); undefined for GET and HEAD. */
  body: Buffer | undefined;
}

/**
 * Answers `req` in full through `reply` and returns true, or returns false having written
 * nothing, or takes it and answers later: a promise that settles once the whole answer is
 * written through `reply` (the lane reads nothing more of the connection until then; a
 * rejection closes the connection).
 */
export type LaneAnswer = (req: LaneRequest, reply: LaneReply) => boolean | Promise<void>;

/** A head longer than this goes to node:http (which allows 16 KiB and answers 431 past it). */
const MAX_HEAD = 8 * 1024;
/** More header lines than this go to node:http. */
const MAX_HEADERS = 64;
const REQUEST_LINE = /^(GET|HEAD|POST) (\/[\x21-\x7e]*) HTTP\/1\.1$/;
/** A Content-Length the lane reads: decimal digits only, no sign, no list, no spaces inside. */
const CONTENT_LENGTH = /^[0-9]{1,6}$/;
const FIELD_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Printable ASCII, space and tab: no control characters, no bytes past 0x7e (node:http judges those). */
const FIELD_VALUE = /^[\t\x20-\x7e]*$/;
/**
 * Headers that frame a body, change the connection or ask for something only node:http does:
 * a request carrying one is node:http's.
 */
const NOT_IN_LANE = new Set(['content-length', 'transfer-encoding', 'upgrade', 'expect', 'te', 'http2-settings', 'trailer', 'proxy-connection']);

const OK_LINE = 'HTTP/1.1 200 OK\r\n';
/** A head whose bytes are the same in latin1 and UTF-8. */
const ASCII = /^[\x00-\x7f]*$/;

/** The Date header's value, made once a second as node:http's is. */
let dateSecond = -1;
let dateValue = '';
function httpDate(): string {
  const second = Math.floor(Date.now() / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateValue = new Date(second * 1000).toUTCString();
  }
  return dateValue;
}

/** Answers whose body is at most this long go out as one buffer, head and body copied together (writeJoined). */
const JOIN_MAX = 16 * 1024;
/** The most a joined answer takes: a head of up to MAX_HEAD and a body of up to JOIN_MAX. */
const JOINED_MAX = JOIN_MAX + MAX_HEAD;

/**
 * Writes `head` and a short `body` as one buffer: one write of one chunk, where a corked pair of
 * writes goes through the stream's buffered list and a writev of two chunks (a string copied in
 * C++), objects made for each answer; a copy of up to 16 KiB costs less than that
 * (docs/decisions.md, "The lane's answer in one buffer"). While nothing waits in the socket's
 * stream, the answer is copied into the turn's batch (putAside) and written straight to the
 * descriptor at the end of the turn; else it goes through the stream, behind what waits there.
 * Not over TLS, whose writes finish a tick later. False, with nothing written, when head and
 * body do not fit.
 */
function writeJoined(socket: Socket, head: string, body: string | Uint8Array, backlogged: (() => void) | undefined): boolean {
  const bodyBytes = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
  // A head past MAX_HEAD (an answer's own headers are short): the caller's two writes, corked.
  if (head.length + bodyBytes > JOINED_MAX) return false;
  if (putAside(socket, head, body, bodyBytes, backlogged)) return true;
  const buf = Buffer.allocUnsafe(head.length + bodyBytes);
  fill(buf, 0, head, body);
  socket.write(buf);
  return true;
}

/** Copies `head` (latin1) and `body` into `buf` from `at`; returns where they end. */
function fill(buf: Buffer, at: number, head: string, body: string | Uint8Array): number {
  let n = at + buf.write(head, at, 'latin1');
  if (typeof body === 'string') n += buf.write(body, n, 'utf8');
  else {
    buf.set(body, n);
    n += body.length;
  }
  return n;
}

/**
 * The turn's batch: answers made while the event loop goes through the connections that have
 * something to read, written together once it has (a setImmediate: the check phase comes right
 * after the poll phase), each straight to its socket's descriptor. An answer written at once
 * wakes a client that sleeps waiting for it at every answer (on one machine, the kernel's
 * wake-up of the client's process was ~10 % of the lane's CPU per cold file); written together,
 * a client with many connections wakes once for all of them, and the answers cost the same
 * system calls (docs/decisions.md, "The lane's answers written at the end of the turn"). Order
 * is kept: a connection's answers are in the batch in order, and anything written to a socket
 * any other way (the stream, an end, a hand-off to node:http, a close) first writes the batch.
 * A connection whose answers in the batch pass its stream's high-water mark within one read
 * (pipelined requests) writes the batch there and then, so that a client that does not read
 * is stopped as before, by its stream (LaneConnection.serve).
 */
const BATCH_BYTES = 1024 * 1024;
/** The most answers in one batch (descriptors and ends kept in typed arrays). */
const BATCH_ANSWERS = 1024;
const batch = Buffer.allocUnsafeSlow(BATCH_BYTES);
const batchSockets: (Socket | undefined)[] = [];
/** Per answer: what to call when the system does not take all of it (the connection's request timer). */
const batchBacklogged: ((() => void) | undefined)[] = [];
const batchFds = new Int32Array(BATCH_ANSWERS);
const batchEnds = new Int32Array(BATCH_ANSWERS);
let batchCount = 0;
let batchBytes = 0;
let batchScheduled = false;
let flushing = false;
/** Bytes ever put into the batch: what a connection put aside within one read is the difference. */
let batchedTotal = 0;

/**
 * Copies an answer for `socket` into the batch and returns true; false, nothing done, when
 * something of the socket waits in its stream (the answer goes behind it), when it has no
 * descriptor, or when the batch is being written and has no room.
 */
function putAside(socket: Socket, head: string, body: string | Uint8Array, bodyBytes: number, backlogged: (() => void) | undefined): boolean {
  if (socket.writableLength !== 0) return false;
  const fd = descriptorOf(socket);
  if (fd < 0) return false;
  if (batchBytes + head.length + bodyBytes > BATCH_BYTES || batchCount === BATCH_ANSWERS) {
    // (No answer is made while the batch is written: nothing it calls calls back at once.)
    if (flushing) return false;
    writeBatch();
    // What the system did not take of this connection's earlier answers now waits in its stream: this one goes behind it.
    if (socket.writableLength !== 0) return false;
  }
  const end = fill(batch, batchBytes, head, body);
  batchSockets[batchCount] = socket;
  batchBacklogged[batchCount] = backlogged;
  batchFds[batchCount] = fd;
  batchEnds[batchCount] = end;
  batchCount++;
  batchedTotal += end - batchBytes;
  batchBytes = end;
  if (!batchScheduled) {
    batchScheduled = true;
    setImmediate(endOfTurn);
  }
  return true;
}

/** The turn's end: the batch written (it may be empty already, written by a call before). */
function endOfTurn(): void {
  batchScheduled = false;
  writeBatch();
}

/** Ends `socket` (the lane's own end, after a FIN), what the turn's batch holds written first. */
function endAfterBatch(socket: Socket): void {
  writeBatch();
  socket.end();
}

/** Closes `socket` (a timeout, a failed answer, an answer's own destroy), what the turn's batch holds written first. */
function destroyAfterBatch(socket: Socket): void {
  writeBatch();
  socket.destroy();
}

/** The socket's descriptor, or -1 (none, or not a number on this Node). */
function descriptorOf(socket: Socket): number {
  const fd = (socket as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : -1;
}

/**
 * Writes the batch, in order, each answer straight to its socket's descriptor (~3 µs less than
 * through the stream; docs/decisions.md, "The lane's short answers straight to the descriptor");
 * what the system does not take goes through the stream as a copy, behind which the socket's
 * next answers then go. An answer whose socket closed meanwhile is dropped: its descriptor may
 * already be another connection's. Called at the end of the turn, and before anything is written
 * to a socket any other way.
 */
function writeBatch(): void {
  if (flushing || batchCount === 0) return;
  flushing = true;
  try {
    let start = 0;
    for (let i = 0; i < batchCount; i++) {
      const socket = batchSockets[i] as Socket;
      const backlogged = batchBacklogged[i];
      const end = batchEnds[i] as number;
      batchSockets[i] = undefined;
      batchBacklogged[i] = undefined;
      if (!socket.destroyed && descriptorOf(socket) === batchFds[i]) {
        const sent = writeDirect(socket, batch, start, end - start);
        if (sent !== end - start) {
          socket.write(Buffer.from(batch.subarray(sent < 0 ? start : start + sent, end)));
          backlogged?.();
        }
      }
      start = end;
    }
  } finally {
    batchCount = 0;
    batchBytes = 0;
    flushing = false;
  }
}

/**
 * Writes `n` bytes of `buf` from `at` straight to the socket's descriptor when nothing waits in
 * its stream, skipping the stream's machinery: the bytes written (all of them as a rule; libuv
 * made the descriptor non-blocking), 0 when the system took none, -1 where it cannot (something
 * waits in the stream, an error the stream is left to report).
 */
function writeDirect(socket: Socket, buf: Buffer, at: number, n: number): number {
  if (socket.writableLength !== 0) return -1;
  try {
    return writeSync(descriptorOf(socket), buf, at, n);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return 0;
    return -1;
  }
}

/**
 * What an answer writes through: the part of node:http's ServerResponse the answers use, with
 * the head node:http would make (the answer's headers, then Date, Connection and Keep-Alive)
 * and head and body handed to the socket in one write.
 */
export class LaneReply {
  statusCode = 200;
  headersSent = false;
  private head = '';
  private readonly socket: Socket;
  private readonly method: string;
  private readonly trailer: string;
  /** Called when the answer, written at the end of the turn, was not all taken by the system (it then waits in the stream). */
  private readonly backlogged: (() => void) | undefined;
  /** Whether an answer that would wait is declined rather than made (FastLaneOptions.nowOnly; PlainReply.nowOnly). */
  readonly nowOnly: boolean;

  constructor(socket: Socket, method: string, trailer: string, backlogged?: () => void, nowOnly = false) {
    this.socket = socket;
    this.method = method;
    this.trailer = trailer;
    this.backlogged = backlogged;
    this.nowOnly = nowOnly;
  }

  writeHead(status: number, headers: readonly string[] | Record<string, string>): this {
    let lines = '';
    if (Array.isArray(headers)) {
      for (let i = 0; i < headers.length; i += 2) lines += `${headers[i] as string}: ${headers[i + 1] as string}\r\n`;
    } else {
      for (const name in headers) lines += `${name}: ${(headers as Record<string, string>)[name] as string}\r\n`;
    }
    return this.writeHeadLines(status, lines);
  }

  /** writeHead with the lines made: the same head, without a string made per header (two per line) on the way. */
  writeHeadLines(status: number, lines: string): this {
    this.statusCode = status;
    this.head = `${status === 200 ? OK_LINE : `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'unknown'}\r\n`}${lines}Date: ${httpDate()}\r\n${this.trailer}`;
    this.headersSent = true;
    return this;
  }

  end(body?: string | Uint8Array): this {
    const socket = this.socket;
    const rest = body === undefined || this.method === 'HEAD' ? '' : body;
    // An answer that comes after the connection closed (an asynchronous one) goes nowhere.
    if (socket.destroyed || socket.writableEnded) this.head = '';
    else if ((socket as { encrypted?: boolean }).encrypted === true) {
      if (rest.length === 0) socket.write(this.head, 'latin1');
      // Over TLS a short text answer goes as one string (an ASCII head is its own UTF-8): one
      // write of one chunk, where a corked pair goes through the stream's buffered list and a
      // writev (docs/decisions.md, "The token endpoint in the fast lane").
      else if (typeof rest === 'string' && rest.length <= JOIN_MAX && ASCII.test(this.head)) socket.write(this.head + rest, 'utf8');
      else this.corked(rest);
    } else if (rest.length > JOIN_MAX || !writeJoined(socket, this.head, rest, this.backlogged)) {
      // Behind this connection's answers in the turn's batch, if it has any.
      writeBatch();
      this.corked(rest);
    }
    this.head = '';
    return this;
  }

  /** The head and `body` as two writes, corked. */
  private corked(body: string | Uint8Array): void {
    const socket = this.socket;
    socket.cork();
    socket.write(this.head, 'latin1');
    if (typeof body === 'string') socket.write(body, 'utf8');
    else socket.write(body);
    socket.uncork();
  }

  /**
   * What of the answers written on this connection waits in the socket's stream for the client
   * to read (not what waits in the turn's batch: a copy, written at the turn's end).
   */
  get writableLength(): number {
    return this.socket.writableLength;
  }

  /**
   * Calls `listener` once this answer has left the socket's stream (at once when it went into
   * the turn's batch, which holds a copy), or the connection closed. An empty write
   * after it calls back once everything written before it is out (node:http's own end() waits
   * the same way); 'drain' would not come for an answer under the socket's high-water mark.
   */
  once(_event: 'close', listener: () => void): this {
    const socket = this.socket;
    if (socket.writableLength === 0 || socket.destroyed) {
      listener();
      return this;
    }
    let called = false;
    const done = (): void => {
      if (called) return;
      called = true;
      socket.removeListener('close', done);
      listener();
    };
    socket.once('close', done);
    if (!socket.writableEnded) socket.write('', 'latin1', done);
    return this;
  }

  destroy(): void {
    destroyAfterBatch(this.socket);
  }
}

/** The POSTs a lane reads: to these paths (exactly, no query), with a Content-Length body of 1 to `maxBody` bytes. */
export interface LanePosts {
  paths: ReadonlySet<string>;
  maxBody: number;
}

/** Options of `installFastLane`. */
export interface FastLaneOptions {
  answer: LaneAnswer;
  /**
   * True: the listener's answers are given now or declined, never later (each LaneReply's
   * `nowOnly`), so what would wait is node:http's (the cover art listener: node:http runs a
   * connection's pipelined requests side by side, where the lane would wait for each in turn).
   */
  nowOnly?: boolean;
  /** POSTs the lane reads (with their bodies) and offers to `answer`; none without. */
  posts?: LanePosts;
  connections: ConnectionLimits;
  /** The server's event for a connection ready for HTTP: 'connection', or an HTTPS server's 'secureConnection' (after the handshake). */
  event?: 'connection' | 'secureConnection';
}

/**
 * Puts the fast lane in front of `server`'s own connection handling: every connection the
 * server accepts is read by the lane until it gives the connection to node:http. The server's
 * connection cap counts both; its closeIdleConnections (at close, and when the cap is reached)
 * and closeAllConnections close the lane's connections too.
 */
export function installFastLane(server: Server, opts: FastLaneOptions): void {
  const event = opts.event ?? 'connection';
  const [nodeListener, ...others] = server.listeners(event) as ((socket: Socket) => void)[];
  if (nodeListener === undefined || others.length !== 0) throw new Error(`the fast lane goes in before any other ${event} listener`);
  server.removeListener(event, nodeListener);
  const open = new Set<LaneConnection>();
  const limits = opts.connections;
  const keepAliveS = Math.floor(limits.keepAliveTimeoutMs / 1000);
  const trailer = flatLatin1(`Connection: keep-alive\r\nKeep-Alive: timeout=${keepAliveS}\r\n\r\n`);
  const lane: Lane = {
    answer: opts.answer,
    nowOnly: opts.nowOnly === true,
    posts: opts.posts,
    limits,
    // node:http keeps an idle connection a little past the Keep-Alive it announces (1 s in Node
    // 20; keepAliveTimeoutBuffer where Node has it), so a client reusing it at the last moment
    // does not meet a closed socket.
    idleMs: limits.keepAliveTimeoutMs + ((server as { keepAliveTimeoutBuffer?: number }).keepAliveTimeoutBuffer ?? 1000),
    trailer,
    open,
    toNode(socket: Socket): void {
      nodeListener.call(server, socket);
    },
    closing: () => !server.listening,
  };
  server.on(event, (socket: Socket) => {
    open.add(new LaneConnection(socket, lane));
  });
  const closeIdle = server.closeIdleConnections.bind(server);
  server.closeIdleConnections = function closeIdleConnections(): void {
    // A connection whose answer waits in the turn's batch looks idle: the answer goes out first.
    writeBatch();
    closeIdle();
    for (const c of open) if (c.idle()) c.socket.destroy();
  };
  const closeAll = server.closeAllConnections.bind(server);
  server.closeAllConnections = function closeAllConnections(): void {
    writeBatch();
    closeAll();
    for (const c of open) c.socket.destroy();
  };
}

interface Lane {
  answer: LaneAnswer;
  nowOnly: boolean;
  posts: LanePosts | undefined;
  limits: ConnectionLimits;
  /** How long an idle connection is kept after an answer: the keep-alive timeout and node:http's margin. */
  idleMs: number;
  trailer: string;
  open: Set<LaneConnection>;
  toNode(socket: Socket): void;
  closing(): boolean;
}

/** How many bytes one read of a plain connection takes at most (libuv's own suggestion is 64 KiB too). */
const READ_BYTES = 64 * 1024;
/**
 * The one buffer the lane's plain connections are read into (Node's `onread`): the lane
 * answers what a read brought before the next read, and copies what it keeps past that (a
 * request waiting its turn, a POST's body, the bytes handed to node:http).
 */
const reads = Buffer.allocUnsafeSlow(READ_BYTES);

/** The symbols net.Socket keeps its `onread` options under, found on the first socket (null once known to be absent). */
let onreadKeys: { buffer: symbol; callback: symbol } | null | undefined;

function onreadKeysOf(socket: Socket): { buffer: symbol; callback: symbol } | null {
  if (onreadKeys !== undefined) return onreadKeys;
  const own = new Map(Object.getOwnPropertySymbols(socket).map((key) => [key.description, key]));
  const buffer = own.get('kBuffer');
  const callback = own.get('kBufferCb');
  const bag = socket as unknown as Record<symbol, unknown>;
  onreadKeys = buffer !== undefined && callback !== undefined && bag[buffer] === null && bag[callback] === null ? { buffer, callback } : null;
  return onreadKeys;
}

/**
 * Makes an accepted plain socket read into the shared buffer and call `callback` with each
 * read (what `new net.Socket({ onread })` does for a socket it makes, which a server's own
 * sockets cannot be given), and returns true; false, nothing changed, for a TLS socket, one
 * with bytes already waiting in its stream, or where this Node keeps `onread` otherwise. By
 * default each read is a new ArrayBuffer of its own memory (a 64 KiB allocation cut to size),
 * made into a Buffer and pushed through the stream's machinery to 'data': garbage the young
 * generation's collection must sweep one by one, the largest part of its pauses under load
 * (docs/decisions.md, "The lane reads into one buffer").
 */
function readIntoShared(socket: Socket, callback: (bytes: number, buf: Buffer) => void): boolean {
  // Bytes already in the stream (put back by someone who read first) would never reach the callback.
  if ((socket as { encrypted?: boolean }).encrypted === true || socket.readableLength !== 0) return false;
  const handle = (socket as unknown as { _handle?: { useUserBuffer?: unknown } | null })._handle;
  if (handle === null || handle === undefined || typeof handle.useUserBuffer !== 'function') return false;
  const keys = onreadKeysOf(socket);
  if (keys === null) return false;
  const bag = socket as unknown as Record<symbol, unknown>;
  bag[keys.buffer] = reads;
  bag[keys.callback] = callback;
  (handle.useUserBuffer as (buf: Uint8Array) => void).call(handle, reads);
  return true;
}

/** Makes a socket that reads into the shared buffer give its reads to the stream again, each a copy: as 'data', for node:http. */
function readIntoStream(socket: Socket): void {
  const bag = socket as unknown as Record<symbol, unknown>;
  const keys = onreadKeys as { buffer: symbol; callback: symbol };
  bag[keys.callback] = (bytes: number, buf: Buffer): boolean => socket.push(Buffer.from(buf.subarray(0, bytes)));
}

/** One connection while the lane reads it. */
class LaneConnection {
  readonly socket: Socket;
  private readonly lane: Lane;
  /** Whether the socket reads into the shared buffer (readIntoShared): what is kept of a read is copied. */
  private readonly shared: boolean;
  /** Requests that arrived while earlier answers waited for the client to read them. */
  private waiting: Buffer | undefined;
  private readonly onData = (chunk: Buffer): void => this.read(chunk);
  private readonly onRead = (bytes: number, buf: Buffer): void => this.read(buf.subarray(0, bytes));
  private readonly onDrain = (): void => this.drained();
  private readonly onTimeout = (): void => destroyAfterBatch(this.socket);
  /** An answer the system did not take all of at the turn's end: the client has it to read, under the request timeout. */
  private readonly onBacklog = (): void => this.setTimer(this.lane.limits.requestTimeoutMs);
  /** The socket's idle timeout now (set only when it changes: each setTimeout makes a new timer). */
  private timeout: number;
  /** A reset or a failed write: the connection is gone (node:http's own listener takes over at the hand-off). */
  private readonly onError = (): void => {
    this.socket.destroy();
  };
  private readonly onClose = (): void => {
    this.lane.open.delete(this);
  };
  /** The client has sent all it will (FIN): the connection ends once what it asked is answered, as node:http ends it. */
  private readonly onEnd = (): void => {
    if (this.waiting === undefined && !this.pending) endAfterBatch(this.socket);
    else this.ended = true;
  };
  private ended = false;
  /** An answer is being made (LaneAnswer's promise): what arrives meanwhile waits, unread, in `waiting`. */
  private pending = false;
  private readonly onAnswered = (): void => this.answeredLater();
  private readonly onFailed = (): void => {
    this.pending = false;
    // The answers before the one that failed go first.
    destroyAfterBatch(this.socket);
  };

  constructor(socket: Socket, lane: Lane) {
    this.socket = socket;
    this.lane = lane;
    this.shared = readIntoShared(socket, this.onRead);
    if (!this.shared) socket.on('data', this.onData);
    socket.on('error', this.onError);
    socket.on('close', this.onClose);
    socket.on('end', this.onEnd);
    socket.on('timeout', this.onTimeout);
    // A connection that sends nothing goes at the header timeout, as node:http's do.
    this.timeout = lane.limits.headersTimeoutMs;
    socket.setTimeout(this.timeout);
  }

  /** Whether an answer was written: a connection that has sent nothing yet is not idle (nor is it to node:http). */
  private answered = false;

  /**
   * Between requests: at least one answered, nothing read and unanswered, nothing in the
   * socket's stream unread (the turn's batch is written before idle connections are closed).
   */
  idle(): boolean {
    return this.answered && this.waiting === undefined && !this.pending && this.socket.writableLength === 0;
  }

  private read(chunk: Buffer): void {
    let buf = chunk;
    if (this.waiting !== undefined) {
      buf = Buffer.concat([this.waiting, chunk]);
      this.waiting = undefined;
    }
    // Data of a read already under way when the socket was paused: kept for after the answer.
    if (this.pending) this.waiting = this.own(buf);
    else this.serve(buf);
  }

  /** `buf` where the connection may keep it: a copy of a part of the shared buffer. */
  private own(buf: Buffer): Buffer {
    return this.shared && buf.buffer === reads.buffer ? Buffer.from(buf) : buf;
  }

  /** Answers the whole requests in `buf`, in order, until one is not the lane's. */
  private serve(buf: Buffer): void {
    const socket = this.socket;
    let at = 0;
    let mark = batchedTotal;
    while (at < buf.length) {
      // Answers of this read past the high-water mark in the batch: written now, so the stream shows whether the client reads.
      if (batchedTotal - mark > socket.writableHighWaterMark) {
        writeBatch();
        mark = batchedTotal;
      }
      if (socket.writableNeedDrain) {
        // The client is not reading: no more answers until it does (node:http stops the same way).
        this.waiting = this.own(buf.subarray(at));
        socket.pause();
        socket.once('drain', this.onDrain);
        this.setTimer(this.lane.limits.requestTimeoutMs);
        return;
      }
      const end = buf.indexOf('\r\n\r\n', at, 'latin1');
      if (end === -1 || end - at > MAX_HEAD || this.lane.closing()) return this.toNode(buf.subarray(at));
      const req = parseHead(buf.toString('latin1', at, end), socket, this.lane.posts);
      if (req === undefined) return this.toNode(buf.subarray(at));
      let next = end + 4;
      if (req.method === 'POST') {
        // A body not all here yet (cut across reads) is node:http's, with its request.
        const length = Number(req.headers['content-length']);
        if (next + length > buf.length) return this.toNode(buf.subarray(at));
        req.body = this.own(buf.subarray(next, next + length));
        next += length;
      }
      const reply = new LaneReply(socket, req.method, this.lane.trailer, this.onBacklog, this.lane.nowOnly);
      const taken = this.lane.answer(req, reply);
      if (taken === false) return this.toNode(buf.subarray(at));
      if (taken !== true) return this.answerLater(taken, buf.subarray(next));
      this.answered = true;
      if (socket.destroyed) return;
      at = next;
    }
    // Between requests: the keep-alive timeout, or the request timeout while an answer waits to be read.
    this.setTimer(socket.writableLength === 0 ? this.lane.idleMs : this.lane.limits.requestTimeoutMs);
  }

  private setTimer(timeout: number): void {
    if (timeout === this.timeout) return;
    this.timeout = timeout;
    this.socket.setTimeout(timeout);
  }

  /**
   * An answer made asynchronously: the connection reads nothing more (`rest`, what came after
   * the request, and whatever arrives meanwhile wait) until it is written, then goes on as
   * after a drain. Meanwhile the request timeout is the socket's, as node:http's server.timeout
   * is while a request is open.
   */
  private answerLater(answer: Promise<void>, rest: Buffer): void {
    this.pending = true;
    if (rest.length !== 0) this.waiting = this.own(rest);
    this.socket.pause();
    this.setTimer(this.lane.limits.requestTimeoutMs);
    answer.then(this.onAnswered, this.onFailed);
  }

  private answeredLater(): void {
    this.pending = false;
    this.answered = true;
    if (this.socket.destroyed) return;
    if (this.socket.writableNeedDrain) {
      // The client is not reading: the rest waits for the drain, as in serve.
      this.socket.once('drain', this.onDrain);
      return;
    }
    this.drained();
  }

  private drained(): void {
    const buf = this.waiting;
    this.waiting = undefined;
    this.socket.resume();
    if (buf !== undefined) this.serve(buf);
    // Over TLS an answer just written is still in the socket's buffer: under the high-water
    // mark it goes out at once, so it is the keep-alive timeout that runs.
    else this.setTimer(this.socket.writableNeedDrain ? this.lane.limits.requestTimeoutMs : this.lane.idleMs);
    if (this.ended && this.waiting === undefined && !this.pending && !this.socket.destroyed) endAfterBatch(this.socket);
  }

  /** Gives the connection to node:http, `rest` (the bytes not answered) unread. */
  private toNode(rest: Buffer): void {
    writeBatch();
    const socket = this.socket;
    if (this.shared) readIntoStream(socket);
    else socket.removeListener('data', this.onData);
    socket.removeListener('error', this.onError);
    socket.removeListener('close', this.onClose);
    socket.removeListener('end', this.onEnd);
    socket.removeListener('timeout', this.onTimeout);
    socket.removeListener('drain', this.onDrain);
    socket.setTimeout(0);
    this.lane.open.delete(this);
    // Paused while node:http takes it, resumed a tick later (as the auth listener's protocol
    // sniffer hands a connection on): node:http then reads it its own way from the start. Handed
    // on while flowing, a TLS connection cost its later requests ~200 µs each.
    socket.pause();
    if (rest.length !== 0) socket.unshift(this.own(rest));
    this.lane.toNode(socket);
    process.nextTick(() => socket.resume());
  }
}

/** A space or a tab (the optional whitespace around a header's value). */
function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

/**
 * Header names clients send most, as sent (lower case, and each word capitalised) to their
 * lower-case form: a name given in the code, which V8 keeps once (internalised), so the header
 * object's key is found without the string table lookup that a name made per request (by
 * toLowerCase) costs at each use as a key. Others are lower-cased as they come.
 */
const COMMON_NAMES = new Map<string, string>();
for (const lower of [
  'host',
  'user-agent',
  'accept',
  'accept-encoding',
  'accept-language',
  'connection',
  'referer',
  'origin',
  'cache-control',
  'pragma',
  'if-none-match',
  'if-modified-since',
  'if-range',
  'range',
  'cookie',
  'authorization',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-request-id',
  'dnt',
  'priority',
  'upgrade-insecure-requests',
  'sec-fetch-dest',
  'sec-fetch-mode',
  'sec-fetch-site',
  'sec-fetch-user',
  'sec-ch-ua',
  'sec-ch-ua-mobile',
  'sec-ch-ua-platform',
]) {
  COMMON_NAMES.set(lower, lower);
  COMMON_NAMES.set(lower.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase()), lower);
}

/**
 * The request of `head` (its bytes up to the blank line, as latin1) when the lane may take it:
 * GET or HEAD of an origin-form target over HTTP/1.1, header lines of a token, a colon and a
 * printable value, no header twice, none of NOT_IN_LANE, Connection only as keep-alive, a Host;
 * or a POST to one of `posts`' paths, the same but for one Content-Length of 1 to maxBody.
 */
function parseHead(head: string, socket: Socket, posts: LanePosts | undefined): LaneRequest | undefined {
  let eol = head.indexOf('\r\n');
  const line = REQUEST_LINE.exec(eol === -1 ? head : head.slice(0, eol));
  if (line === null) return undefined;
  const method = line[1] as 'GET' | 'HEAD' | 'POST';
  const url = line[2] as string;
  const post = method === 'POST';
  if (post && (posts === undefined || !posts.paths.has(url))) return undefined;
  const headers: Record<string, string> = {};
  let count = 0;
  while (eol !== -1) {
    const from = eol + 2;
    eol = head.indexOf('\r\n', from);
    const end = eol === -1 ? head.length : eol;
    const colon = head.indexOf(':', from);
    if (colon <= from || colon >= end || ++count > MAX_HEADERS) return undefined;
    const name = head.slice(from, colon);
    // The value without the spaces and tabs around it.
    let start = colon + 1;
    let stop = end;
    while (start < stop && isBlank(head.charCodeAt(start))) start++;
    while (stop > start && isBlank(head.charCodeAt(stop - 1))) stop--;
    const value = head.slice(start, stop);
    if (!FIELD_NAME.test(name) || !FIELD_VALUE.test(value)) return undefined;
    const lower = COMMON_NAMES.get(name) ?? name.toLowerCase();
    // A name already there (or one an object has of its own, such as __proto__) is node:http's to judge.
    if (lower in headers) return undefined;
    // A POST's one Content-Length frames its body; anything else that frames one is node:http's.
    if (NOT_IN_LANE.has(lower) && !(post && lower === 'content-length' && CONTENT_LENGTH.test(value))) return undefined;
    if (lower === 'connection' && value.toLowerCase() !== 'keep-alive') return undefined;
    headers[lower] = value;
  }
  // Without a Host, node:http answers 400 (requireHostHeader).
  if (headers.host === undefined) return undefined;
  if (post) {
    const length = headers['content-length'] === undefined ? 0 : Number(headers['content-length']);
    if (length < 1 || length > (posts as LanePosts).maxBody) return undefined;
  }
  return { method, url, headers, socket, body: undefined };
}
