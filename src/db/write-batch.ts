import type { Kysely, Transaction } from 'kysely';

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

  constructor(db: Kysely<any>, maxBatch = 256) {
    this.db = db;
    this.maxBatch = maxBatch;
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
    const outcomes: ({ ok: true; value: unknown } | { ok: false; err: unknown })[] = [];
    try {
      await this.db.transaction().execute(async (trx) => {
        for (const job of jobs) {
          try {
            outcomes.push({ ok: true, value: await job.run(trx) });
          } catch (err) {
            outcomes.push({ ok: false, err });
          }
        }
      });
    } catch (err) {
      for (const job of jobs) job.reject(err);
      return;
    }
    jobs.forEach((job, i) => {
      const o = outcomes[i];
      if (o?.ok) job.resolve(o.value);
      else job.reject(o?.err);
    });
  }
}
