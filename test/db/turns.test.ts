/*
 * The SQLite connection taken in turns (src/db/connect.ts): one holder at a time, waiters
 * served in the order they asked, and statements and transactions that overlap on the one
 * connection still each see their own work.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { openDatabase, Turns, type DatabaseHandle } from '../../src/db/connect.js';
import { makeTestEnv, type TestEnv } from '../helpers/env.js';

describe('Turns', () => {
  it('hands the lock to one waiter at each pass, in the order they asked', async () => {
    const turns = new Turns();
    const order: number[] = [];
    await turns.take();
    const waiters = [1, 2, 3].map((n) => turns.take().then(() => order.push(n)));
    await Promise.resolve();
    assert.deepEqual(order, [], 'nobody gets a held lock');
    turns.pass();
    await waiters[0];
    await Promise.resolve();
    assert.deepEqual(order, [1], 'one pass, one waiter');
    turns.pass();
    turns.pass();
    await Promise.all(waiters);
    assert.deepEqual(order, [1, 2, 3]);
    turns.pass();
    // Free again: taken at once.
    let taken = false;
    await turns.take().then(() => (taken = true));
    assert.equal(taken, true);
  });
});

describe('SQLite connection in turns', () => {
  let t: TestEnv;
  let h: DatabaseHandle;

  before(async () => {
    t = await makeTestEnv();
    h = await openDatabase({ kind: 'sqlite', file: `${t.dir}/turns.db` });
    await sql`create table turn_probe (id integer primary key, v integer not null)`.execute(h.db);
  });

  after(async () => {
    await h?.close();
    await t?.cleanup();
  });

  it('runs many concurrent statements and transactions, none inside another transaction', async () => {
    // Each transaction writes a row, waits a turn of the event loop, then reads its own row
    // back: were another's statement run on the connection inside it, a rollback would take it along.
    const jobs = Array.from({ length: 60 }, (_, i) =>
      i % 3 === 0
        ? h.db.transaction().execute(async (trx) => {
            await sql`insert into turn_probe (id, v) values (${i}, ${i})`.execute(trx);
            await new Promise((r) => setImmediate(r));
            if (i % 2 === 0) throw new Error('rolled back');
            return Number((await sql<{ v: number }>`select v from turn_probe where id = ${i}`.execute(trx)).rows[0]?.v);
          })
        : sql`insert into turn_probe (id, v) values (${i}, ${i})`.execute(h.db).then(() => i),
    );
    const outcomes = await Promise.allSettled(jobs);
    const kept = (await sql<{ id: number }>`select id from turn_probe order by id`.execute(h.db)).rows.map((r) => Number(r.id));
    const expected = Array.from({ length: 60 }, (_, i) => i).filter((i) => !(i % 3 === 0 && i % 2 === 0));
    assert.deepEqual(kept, expected);
    outcomes.forEach((o, i) => assert.equal(o.status, i % 6 === 0 ? 'rejected' : 'fulfilled', `job ${i}`));
  });
});
