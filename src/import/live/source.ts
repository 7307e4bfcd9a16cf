/*
 * The mirror's database (SLEEVE_MUSICBRAINZ_DATABASE_URL), read only: every read runs in
 * a REPEATABLE READ READ ONLY transaction, so all it answers is one committed state of the
 * mirror, whatever replication commits meanwhile (docs/mirror-database.md).
 */
import pg from 'pg';

/** Runs one statement of a snapshot and answers its rows. */
export type LiveQuery = <T = Record<string, unknown>>(text: string, values?: unknown[]) => Promise<T[]>;

/** BIGINT (image ids, sums, counts) as JavaScript numbers: the values sleeve reads fit well inside 2^53. */
export const LIVE_TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format))) as typeof pg.types.getTypeParser,
};

/** Error codes that mean the database is away (not that sleeve asked something wrong); 3D000: not created yet (a mirror being restored). */
const AWAY_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', '57P01', '57P02', '57P03', '53300', '3D000']);

/** Whether `err` says the mirror's database cannot be reached now (then sleeve waits and retries). */
export function isMirrorAway(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined;
  if (e === undefined || e === null) return false;
  if (typeof e.code === 'string' && (AWAY_CODES.has(e.code) || e.code.startsWith('08'))) return true;
  return /Connection terminated|timeout exceeded when trying to connect|Query read timeout|connect ETIMEDOUT|the database system is (starting up|shutting down)|is not currently accepting connections|terminating connection due to administrator command/i.test(e.message ?? '');
}

export class LiveSource {
  private readonly pool: pg.Pool;

  constructor(url: string, statementTimeoutMs: number) {
    this.pool = new pg.Pool({
      connectionString: url,
      // One reader at a time does the work; a second lets a readiness probe through meanwhile.
      max: 2,
      connectionTimeoutMillis: 5000,
      idleTimeoutMillis: 30_000,
      statement_timeout: statementTimeoutMs,
      query_timeout: statementTimeoutMs + 5000,
      application_name: 'sleeve',
      keepAlive: true,
      types: LIVE_TYPES,
    });
    // An idle connection the server dropped: the pool discards it and the next read connects again.
    this.pool.on('error', () => {});
  }

  /** Runs `fn` in one snapshot of the mirror (a REPEATABLE READ READ ONLY transaction). */
  async snapshot<T>(fn: (q: LiveQuery) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let failed: unknown;
    // The server ending the connection between two statements: the next statement fails with it (not an uncaught error).
    const lost = (err: Error) => {
      failed ??= err;
    };
    client.on('error', lost);
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const q: LiveQuery = async <R>(text: string, values: unknown[] = []) => (await client.query({ text, values })).rows as R[];
      const result = await fn(q);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      failed = err;
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.off('error', lost);
      // A connection that failed mid-transaction is not reused.
      client.release(failed !== undefined && isMirrorAway(failed) ? (failed as Error) : undefined);
    }
  }

  /** Answers when the mirror's database answers a query; rejects saying why not. */
  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}
