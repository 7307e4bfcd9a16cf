import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/** How long a connection answered for a malformed request may take to read the answer before it is dropped. */
const LINGER_MS = 2_000;
/**
 * How long the answers to the requests before a malformed one may take to finish before the
 * connection is dropped (Node takes the socket's idle timeout away at a parse error).
 */
const EARLIER_MS = 60_000;

/** Connections whose malformed request is being answered: Node may report the error again as more bytes come. */
const answering = new WeakSet<Duplex>();

/** The whole answer (head and body, as bytes on the wire) to a request Node's parser refused. */
export type ErrorAnswer = (err: NodeJS.ErrnoException) => string;

/**
 * A server's 'clientError' handler (Fastify's clientErrorHandler): answers a request Node's
 * parser refused (a malformed request line or header, a head over the size limit, a request
 * that took too long) with `answer`, and closes the connection once the answer is out.
 * Fastify's own handler writes then destroys at once, which over TLS throws the unsent answer
 * away (the client saw a reset, not a 400), and throws away the answers still to be written
 * to the requests that came before it on the connection. Those are answered first, in order,
 * as the fast lane answers them (docs/decisions.md, "The fast lane: plain requests answered before
 * node:http", its paragraph on a malformed request after pipelined ones); the ones after it are not read.
 */
function clientErrorHandler(answer: ErrorAnswer): (err: NodeJS.ErrnoException, socket: Duplex) => void {
  return function answerClientError(err, socket) {
    if (err.code === 'ECONNRESET' || socket.destroyed || answering.has(socket)) return;
    // A TLS handshake that failed or timed out (the HTTPS server passes those on as client
    // errors): there is no channel to answer on, and an answer would wait for a handshake that
    // never completes.
    if (!socket.writable || isTlsFailure(err)) {
      socket.destroy();
      return;
    }
    answering.add(socket);
    const limit = setTimeout(() => socket.destroy(), EARLIER_MS).unref();
    afterEarlierAnswers(socket, () => {
      clearTimeout(limit);
      if (!socket.writable) {
        socket.destroy();
        return;
      }
      socket.end(answer(err));
      setTimeout(() => socket.destroy(), LINGER_MS).unref();
    });
  };
}

/** The auth listener's answer: a small JSON error in OAuth's words. */
export const answerClientError = clientErrorHandler(function oauthError(err) {
  const [status, text, description] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'The request head is too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'The request took too long']
        : [400, 'Bad Request', 'The request could not be understood'];
  const body = JSON.stringify({ error: 'invalid_request', error_description: description });
  return `HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`;
});

/** The cover art listener's answer: Fastify's default one, word for word (as it was before this handler). */
export const answerClientErrorAsFastify = clientErrorHandler(function fastifyError(err) {
  const [status, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, 'Client Timeout'] : err.code === 'HPE_HEADER_OVERFLOW' ? [431, 'Exceeded maximum allowed HTTP header size'] : [400, 'Client Error'];
  const text = STATUS_CODES[status] as string;
  const body = `{"error":"${text}","message":"${message}","statusCode":${status}}`;
  return `HTTP/1.1 ${status} ${text}\r\nContent-Length: ${body.length}\r\nContent-Type: application/json\r\n\r\n${body}`;
});

/**
 * Calls `then` once no answer of the connection is under way: node:http gives the socket to
 * each pipelined request's answer in turn (`_httpMessage`), the next one on the 'finish' of the
 * one before (an answer all written may not have had its 'finish' yet: it still holds the
 * socket, and the next waits behind it), so the check is made again after each.
 */
function afterEarlierAnswers(socket: Duplex, then: () => void): void {
  const current = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
  if (current === null || current === undefined) {
    then();
    return;
  }
  // The request the error cut short (a malformed body) is never whole, so its answer may never
  // finish: the error now, as before (an answer already under way is cut: the error would land inside it).
  if (!current.req.complete) {
    if (current.headersSent) socket.destroy();
    else then();
    return;
  }
  // After node:http's own 'finish' listener, which hands the socket to the next answer.
  const next = (): void => {
    current.removeListener('close', next);
    current.removeListener('finish', next);
    if (socket.destroyed) return;
    afterEarlierAnswers(socket, then);
  };
  current.once('finish', next);
  current.once('close', next);
}

/** Errors of the TLS layer itself (handshake timeout, OpenSSL's refusals), not of HTTP. */
function isTlsFailure(err: NodeJS.ErrnoException): boolean {
  const code = err.code ?? '';
  return code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_') || (err as { library?: unknown }).library !== undefined;
}
