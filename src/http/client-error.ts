import type { Duplex } from 'node:stream';

/** How long a connection answered for a malformed request may take to read the answer before it is dropped. */
const LINGER_MS = 2_000;

/**
 * Answers a request Node's parser refused (a malformed request line or header, a head
 * over the size limit, a request that took too long) with a small JSON error, and closes
 * the connection once the answer is out. Fastify's own handler writes then destroys at
 * once, which over TLS throws the unsent answer away: the client saw a reset, not a 400.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // A TLS handshake that failed or timed out (the HTTPS server passes those on as client
  // errors): there is no channel to answer on, and an answer would wait for a handshake that
  // never completes.
  // A response already under way on this connection: an answer now would land inside it.
  const busy = (socket as { _httpMessage?: { headersSent?: boolean } | null })._httpMessage?.headersSent === true;
  if (!socket.writable || busy || isTlsFailure(err)) {
    socket.destroy();
    return;
  }
  const [status, text, description] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'The request head is too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'The request took too long']
        : [400, 'Bad Request', 'The request could not be understood'];
  const body = JSON.stringify({ error: 'invalid_request', error_description: description });
  socket.end(`HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
  setTimeout(() => socket.destroy(), LINGER_MS).unref();
}

/** Errors of the TLS layer itself (handshake timeout, OpenSSL's refusals), not of HTTP. */
function isTlsFailure(err: NodeJS.ErrnoException): boolean {
  const code = err.code ?? '';
  return code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_') || (err as { library?: unknown }).library !== undefined;
}
