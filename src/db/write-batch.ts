import { sql, type Kysely, type Transaction } from 'kysely';
import { sqliteStatementsOf, type SqliteStatements } from './connect.js';
import { dialectOf } from './dialect.js';

/** The batches' transactions open now on SQLite, each with its database's statements. */
const openBatches = new WeakMap<Kysely<any>, SqliteStatements>();

/**
 * The statements of SQLite's one connection when `db` is a write batch's transaction that is
 * open (between its begin and its commit, the connection is the batch's alone): db/prepared.ts
 * runs its compiled statements on them directly, without Kysely's executor around each one.
 * Undefined for anything else (PostgreSQL, the database itself, other transactions).
 */
export function batchStatements(db: Kysely<any>): SqliteStatements | undefined {
  return openBatches.get(db);
}

type Job = {
  run: (trx: Transaction<any>) => Promise<unknown>;
  resolve: (value: any) => void;
  reject: (err: unknown) => void;
};

/**
 * Group commit: small writes that arrive together (many clients refreshing at once) run
 * in one transaction, so they share one commit instead of paying for one each. Each
 * caller still gets its own result or error, only after the commit; a job that fails
 * does not fail the others (each statement's effect is its own).
 */
export class WriteBatcher {
  private readonly db: Kysely<any>;
  private queue: Job[] = [];
  private scheduled = false;
  private readonly maxBatch: number;
  /** Whether read() runs its job in a batch (SQLite), so that a job may read and then write in one transaction. */
  readonly readsInBatches: boolean;
  private readonly statements: SqliteStatements | undefined;

  constructor(db: Kysely<any>, maxBatch = 256) {
    this.db = db;
    this.maxBatch = maxBatch;
    this.readsInBatches = !dialectOf(db).queriesAreRoundTrips;
    this.statements = sqliteStatementsOf(db);
  }

  /**
   * A read made for a write that follows it (a token request's lookup before its batched
   * write). On SQLite it runs as a job of the next batch: a statement outside a transaction
   * is a read transaction of its own, whose locks cost two system calls (fcntl), where inside
   * the batch's transaction it shares the batch's. It sees what was committed before, as a
   * read of its own would, and answers after the batch's commit like every job. On a database
   * whose statements are round trips (PostgreSQL) it runs on its own, in parallel with the
   * batch, rather than one after another in it. Only for requests that write anyway: a batch
   * waits for SQLite's write lock, which a plain read does not (docs/decisions.md, "Token
   * endpoint CPU: the lookup in the batch, one write per TLS answer").
   */
  read<T>(job: (db: Kysely<any>) => Promise<T>): Promise<T> {
    return this.readsInBatches ? this.run(job) : job(this.db);
  }

  run<T>(job: (trx: Transaction<any>) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run: job, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    const jobs = this.queue.splice(0, this.maxBatch);
    if (this.queue.length > 0) setImmediate(() => void this.flush());
    else this.scheduled = false;
    await this.runBatch(jobs, jobs.length > 1);
  }

  /**
   * Runs `jobs` in one transaction and answers each after its commit. On PostgreSQL a
   * statement that fails aborts the whole transaction, whose COMMIT then rolls back without
   * an error: so when a job failed, the transaction is probed before it commits, and if it
   * is aborted (or the commit fails) with several jobs in it, each job runs again on its own
   * (their effects were rolled back), so that one job's failure is only its own.
   */
  private async runBatch(jobs: Job[], retryAlone: boolean): Promise<void> {
    const outcomes: ({ ok: true; value: unknown } | { ok: false; err: unknown })[] = [];
    try {
      await this.db.transaction().execute(async (trx) => {
        if (this.statements !== undefined) openBatches.set(trx, this.statements);
        try {
          for (const job of jobs) {
            try {
              outcomes.push({ ok: true, value: await job.run(trx) });
            } catch (err) {
              outcomes.push({ ok: false, err });
            }
          }
        } finally {
          openBatches.delete(trx);
        }
        if (outcomes.some((o) => !o.ok)) await sql`select 1`.execute(trx);
      });
    } catch (err) {
      if (retryAlone && outcomes.some((o) => !o.ok)) {
        await Promise.all(jobs.map((job) => this.runBatch([job], false)));
        return;
      }
      // Each failed job with its own error, the others with the transaction's.
      jobs.forEach((job, i) => {
        const o = outcomes[i];
        job.reject(o !== undefined && !o.ok ? o.err : err);
      });
      return;
    }
    jobs.forEach((job, i) => {
      const o = outcomes[i];
      if (o?.ok) job.resolve(o.value);
      else job.reject(o?.err);
    });
  }
}
