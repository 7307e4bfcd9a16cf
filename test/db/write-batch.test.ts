/*
 * Group commit (src/db/write-batch.ts): jobs that arrive together share one transaction, and
 * each gets its own outcome after the commit, on SQLite and on PostgreSQL (where a failed
 * statement aborts the whole transaction).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config/load.js';
import { openDatabase, type DatabaseHandle } from '../../src/db/connect.js';
import { preparedQuery } from '../../src/db/prepared.js';
import { batchStatements, WriteBatcher } from '../../src/db/write-batch.js';
import { makeTestEnv, type TestEnv } from '../helpers/env.js';

describe('WriteBatcher', () => {
  let t: TestEnv;
  let h: DatabaseHandle;

  before(async () => {
    t = await makeTestEnv();
    h = await openDatabase(loadConfig(t.env).database);
    await sql`create table batch_probe (id integer primary key, v text not null)`.execute(h.db);
  });

  after(async () => {
    await h?.close();
    await t?.cleanup();
  });

  const insert = (id: number, v: string | null) => (trx: Parameters<Parameters<WriteBatcher['run']>[0]>[0]) => sql`insert into batch_probe (id, v) values (${id}, ${v})`.execute(trx).then(() => id);
  const rows = async () => (await sql<{ id: number; v: string }>`select id, v from batch_probe order by id`.execute(h.db)).rows.map((r) => [Number(r.id), r.v]);

  it('commits the jobs that succeed when another job of the same batch fails in the database', async () => {
    const batcher = new WriteBatcher(h.db);
    // Queued in the same turn of the event loop: one batch. The middle one breaks a NOT NULL constraint.
    const outcomes = await Promise.allSettled([batcher.run(insert(1, 'a')), batcher.run(insert(2, null)), batcher.run(insert(3, 'c'))]);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    // Answered only once durable: what was answered as done is there (on PostgreSQL the failure aborted the first transaction).
    assert.deepEqual(await rows(), [
      [1, 'a'],
      [3, 'c'],
    ]);
  });

  it("passes on a job's own error without touching the others' writes", async () => {
    const batcher = new WriteBatcher(h.db);
    const refused = new Error('refused by the job');
    const outcomes = await Promise.allSettled([
      batcher.run(insert(4, 'd')),
      batcher.run(async () => {
        throw refused;
      }),
    ]);
    assert.equal(outcomes[0]?.status, 'fulfilled');
    assert.equal(outcomes[1]?.status === 'rejected' && outcomes[1].reason, refused);
    assert.deepEqual((await rows()).at(-1), [4, 'd']);
  });

  it('reads in the batch on SQLite (one transaction with the writes queued with it), alone on PostgreSQL', async () => {
    const batcher = new WriteBatcher(h.db);
    const read = batcher.read(async (db) => ({ inTransaction: db.isTransaction, rows: (await sql<{ v: string }>`select v from batch_probe where id = ${1}`.execute(db)).rows }));
    const [seen] = await Promise.all([read, batcher.run(insert(5, 'e'))]);
    assert.deepEqual(seen.rows, [{ v: 'a' }]);
    assert.equal(seen.inTransaction, h.dialect === 'sqlite');
    assert.deepEqual((await rows()).at(-1), [5, 'e']);
  });

  it("runs prepared statements in an open batch on SQLite's connection directly, with the answers Kysely gives", async () => {
    const insertProbe = preparedQuery(['id', 'v'] as const, (db, p) => db.insertInto('batch_probe').values({ id: p.id, v: p.v }));
    const insertReturning = preparedQuery(['id', 'v'] as const, (db, p) => db.insertInto('batch_probe').values({ id: p.id, v: p.v }).returning('id'));
    const setV = preparedQuery(['v', 'from'] as const, (db, p) => db.updateTable('batch_probe').set({ v: p.v }).where('id', '>=', p.from));
    const read = preparedQuery(['id'] as const, (db, p) => db.selectFrom('batch_probe').select(['id', 'v']).where('id', '=', p.id));
    const batcher = new WriteBatcher(h.db);
    let held: trxOf | undefined;
    type trxOf = Parameters<Parameters<WriteBatcher['run']>[0]>[0];
    const inBatch = await batcher.run(async (trx) => {
      held = trx;
      return {
        direct: batchStatements(trx) !== undefined,
        inserted: await insertProbe(trx, { id: 10, v: 'j' }),
        returned: await insertReturning(trx, { id: 11, v: 'k' }),
        updated: await setV(trx, { v: 'x', from: 10 }),
        row: await read(trx, { id: 11 }),
        none: await read(trx, { id: 99 }),
      };
    });
    assert.equal(inBatch.direct, h.dialect === 'sqlite');
    // Once the batch has committed, its transaction is no longer run on directly.
    assert.equal(held !== undefined && batchStatements(held), undefined);
    assert.equal(batchStatements(h.db), undefined);
    // The same statements through Kysely, outside any batch.
    const outside = {
      inserted: await insertProbe(h.db, { id: 12, v: 'l' }),
      returned: await insertReturning(h.db, { id: 13, v: 'm' }),
      updated: await setV(h.db, { v: 'y', from: 12 }),
      row: await read(h.db, { id: 13 }),
      none: await read(h.db, { id: 99 }),
    };
    assert.deepEqual(inBatch.inserted.numAffectedRows, outside.inserted.numAffectedRows);
    assert.equal(inBatch.inserted.numAffectedRows, 1n);
    if (h.dialect === 'sqlite') assert.deepEqual([inBatch.inserted.insertId, outside.inserted.insertId], [10n, 12n]);
    assert.deepEqual(inBatch.returned.rows.map((r) => Number(r.id)), [11]);
    assert.deepEqual(outside.returned.rows.map((r) => Number(r.id)), [13]);
    assert.deepEqual([inBatch.updated.numAffectedRows, outside.updated.numAffectedRows], [2n, 2n]);
    assert.deepEqual(inBatch.row.rows.map((r) => [Number(r.id), r.v]), [[11, 'x']]);
    assert.deepEqual(outside.row.rows.map((r) => [Number(r.id), r.v]), [[13, 'y']]);
    assert.deepEqual([inBatch.none.rows, outside.none.rows], [[], []]);
  });

  it('a prepared statement that fails in a batch fails its job only', async () => {
    const insertProbe = preparedQuery(['id', 'v'] as const, (db, p) => db.insertInto('batch_probe').values({ id: p.id, v: p.v }));
    const batcher = new WriteBatcher(h.db);
    const outcomes = await Promise.allSettled([batcher.run((trx) => insertProbe(trx, { id: 20, v: 't' })), batcher.run((trx) => insertProbe(trx, { id: 21, v: null })), batcher.run((trx) => insertProbe(trx, { id: 22, v: 'v' }))]);
    assert.deepEqual(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.deepEqual((await rows()).slice(-2), [
      [20, 't'],
      [22, 'v'],
    ]);
  });
});
