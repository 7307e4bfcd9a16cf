import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';

function overTls(socket: Socket | null): boolean {
  return (socket as TLSSocket | null)?.encrypted === true;
}

/**
 * A ServerResponse whose `end(body)` sends the head and the body in one write().
 *
 * Node corks the socket at a response's first write and uncorks it a tick later, and
 * `end(body)` adds an empty final write, so head, body and that empty chunk go out together
 * through writev. Written here as `write(body)`, uncork, `end()`, they go out in a single
 * write() and end() has nothing left to write. Measured on plain node:http servers sending
 * sleeve's 307 on this project's VM: about 45,000 answers/s against 37,000 (bench/RESULTS-archive.md,
 * "Session 3: the hot-path regression found and fixed"). What is sent, and in which order, does not change; only when: at once rather
 * than a tick later. Answers without a head made by writeHead first, and streamed answers
 * (end() without a body), take Node's own path. A text body
 * joins the head in one string; a Buffer stays a chunk of its own (two, not three, in a writev).
 *
 * Not over TLS: a TLS socket finishes each write a tick later, so after the body's write the
 * empty final write of `end()` goes out on its own, one more write() system call per answer
 * (strace: 2.0 writes per answer against Node's own 1.0, where end(body) sends head, body and
 * the empty chunk together in one writev). TLS answers take Node's own path (docs/decisions.md,
 * "Token endpoint CPU: the lookup in the batch, one write per TLS answer").
 */
export class OneWriteResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
  override end(cb?: () => void): this;
  override end(chunk: unknown, cb?: () => void): this;
  override end(chunk: unknown, encoding: BufferEncoding, cb?: () => void): this;
  override end(chunk?: unknown, encoding?: BufferEncoding | (() => void), cb?: () => void): this {
    // Only once writeHead has made the head: before it, end(body) is what lets Node send a
    // Content-Length, where a write first would make the answer chunked.
    if (this.headersSent && (typeof chunk === 'string' || chunk instanceof Uint8Array) && chunk.length > 0 && this.req.method !== 'HEAD' && !overTls(this.socket)) {
      if (typeof encoding === 'function') {
        cb = encoding;
        encoding = undefined;
      }
      if (encoding === undefined) this.write(chunk);
      else this.write(chunk, encoding);
      this.socket?.uncork();
      return super.end(cb);
    }
    return super.end(chunk as never, encoding as never, cb);
  }
}
