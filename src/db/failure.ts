/*
 * The routine ways opening a database fails, as one line for the operator (OperatorError):
 * a PostgreSQL server that is down or refuses the login, a database not created yet, a SQLite
 * file that cannot be opened, and a database without sleeve's tables. Anything else (a bug, a
 * query failing later) is left as it is.
 */
import type { DatabaseConfig } from '../config/load.js';
import { OperatorError } from '../shared/errors.js';

/** Error codes of a connection that never reached a PostgreSQL server. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'ENOENT', 'EACCES']);
/** SQLSTATEs of a login refused: invalid_password, invalid_authorization_specification. */
const LOGIN_REFUSED = new Set(['28P01', '28000']);
/** SQLSTATE invalid_catalog_name: no database of that name. */
const NO_SUCH_DATABASE = '3D000';

/** A postgres:// URL without its password, for messages. */
function redactedUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.href;
  } catch {
    return 'postgres://…';
  }
}

function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return code;
  // Node's connection to a name with several addresses fails with an AggregateError of each attempt.
  if (err instanceof AggregateError) return codeOf(err.errors[0]);
  return undefined;
}

/** The error as an OperatorError when it is a routine failure to open the database, else itself. */
export function databaseFailure(err: unknown, cfg: DatabaseConfig): unknown {
  if (err instanceof OperatorError) return err;
  const code = codeOf(err);
  const message = (err as Error | null)?.message ?? String(err);
  if (cfg.kind === 'sqlite') {
    if (code === undefined || !/^(SQLITE_CANTOPEN|SQLITE_NOTADB|SQLITE_READONLY|SQLITE_PERM|EACCES|EPERM|EROFS|ENOTDIR|EISDIR)/.test(code)) return err;
    return new OperatorError('DATABASE_UNREACHABLE', `cannot open the SQLite database ${cfg.file}: ${message}`, { cause: err });
  }
  const url = new URL(cfg.url);
  const where = `${url.hostname || 'localhost'}:${url.port || '5432'}`;
  const name = decodeURIComponent(url.pathname.slice(1)) || decodeURIComponent(url.username) || 'postgres';
  if (code === NO_SUCH_DATABASE) {
    const user = url.username === '' ? '' : ` -U ${decodeURIComponent(url.username)}`;
    return new OperatorError(
      'NO_DATABASE',
      `PostgreSQL at ${where} has no database "${name}" (SLEEVE_DATABASE_URL ${redactedUrl(cfg.url)}); create it first: createdb -h ${url.hostname || 'localhost'} -p ${url.port || '5432'}${user} ${name}`,
      { cause: err },
    );
  }
  if (code !== undefined && LOGIN_REFUSED.has(code)) {
    return new OperatorError('DATABASE_UNREACHABLE', `PostgreSQL at ${where} refused the login (SLEEVE_DATABASE_URL ${redactedUrl(cfg.url)}): ${message}`, { cause: err });
  }
  if ((code !== undefined && UNREACHABLE.has(code)) || /timeout exceeded when trying to connect|connection timeout|Connection terminated unexpectedly/i.test(message)) {
    return new OperatorError('DATABASE_UNREACHABLE', `cannot reach PostgreSQL at ${where} (SLEEVE_DATABASE_URL ${redactedUrl(cfg.url)}): ${message || code}`, { cause: err });
  }
  return err;
}

/** Where the database is, as messages name it. */
export function describeDatabase(cfg: DatabaseConfig): string {
  return cfg.kind === 'sqlite' ? `the SQLite database ${cfg.file}` : `the PostgreSQL database ${redactedUrl(cfg.url)}`;
}
