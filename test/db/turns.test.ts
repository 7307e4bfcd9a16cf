/*
 * The SQLite connection taken in turns (src/db/connect.ts), through the database handle: one
 * transaction at a time, waiters served in the order they asked, and statements and
 * transactions that overlap on the one connection still each see their own work.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { openDatabase, type DatabaseHandle } from '../../src/db/connect.js';
import { makeTestEnv, type TestEnv } from '../helpers/env.js';

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

  it('gives the connection to one transaction at a time, the waiting ones in the order they asked', async () => {
    const order: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const holding = new Promise<void>((resolve) => (started = resolve));
    const first = h.db.transaction().execute(async (trx) => {
      await sql`insert into turn_probe (id, v) values (1000, 0)`.execute(trx);
      started();
      await held;
      order.push('first');
    });
    await holding;
    const waiters = ['a', 'b', 'c'].map((name, i) =>
      h.db.transaction().execute(async (trx) => {
        order.push(name);
        await sql`insert into turn_probe (id, v) values (${1001 + i}, ${i})`.execute(trx);
      }),
    );
    // However long the first holds it (a few turns of the event loop here), nobody else gets the connection.
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, [], 'nobody gets a held connection');
    release();
    await Promise.all([first, ...waiters]);
    assert.deepEqual(order, ['first', 'a', 'b', 'c']);
    await sql`delete from turn_probe where id >= 1000`.execute(h.db);
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
