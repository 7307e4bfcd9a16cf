/*
 * Whether a database error is a passing condition (busy, locked, away, out of connections)
 * rather than a fault of the request: such a request may be tried again as it was.
 */

/** PostgreSQL SQLSTATEs (or their classes) that say "not now": connection lost, serialization, deadlock, lock timeout, resources, shutting down. */
const PG_TRANSIENT = /^(08|53|57P0[1-3]|40001|40P01|55P03)/;
/** Node's network error codes for a database server that cannot be reached. */
const NET_TRANSIENT = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);
/** node-postgres's own errors for a pool that gave no connection in time or a connection that ended. */
const PG_POOL_MESSAGES = /^(timeout exceeded when trying to connect|Connection terminated|Client has encountered a connection error|Cannot use a pool after calling end)/;

export function isTransientDbError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return true;
    if (NET_TRANSIENT.has(code)) return true;
    if (/^[0-9A-Z]{5}$/.test(code) && PG_TRANSIENT.test(code)) return true;
  }
  const message = (err as { message?: unknown }).message;
  if (typeof message === 'string' && PG_POOL_MESSAGES.test(message)) return true;
  const cause = (err as { cause?: unknown }).cause;
  return cause !== undefined && cause !== err && isTransientDbError(cause);
}
