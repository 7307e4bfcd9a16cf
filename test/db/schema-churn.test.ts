/*
 * A process opens its database while another drops tables in it (an import's staging
 * tables, the first whole read of a mirror's live database): looking for pending migrations
 * asks about sleeve_migration alone, so the start does not fail on a table that vanished.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { DIALECT, makeTestEnv, runCli, type TestEnv } from '../helpers/env.js';

// Enough tables that a listing of all of them takes long enough for a drop to land inside it.
const FILL_TABLES = 300;
const STARTS = 4;

describe(`opening the database while another connection drops tables in it (${DIALECT})`, { skip: DIALECT !== 'postgres' && 'a listing of every table fails only on PostgreSQL; runs on the PostgreSQL pass' }, () => {
  let t: TestEnv;
  let churn: pg.Client;

  before(async () => {
    t = await makeTestEnv();
    churn = new pg.Client({ connectionString: t.env.SLEEVE_DATABASE_URL });
    await churn.connect();
    await churn.query(`DO $$ BEGIN FOR i IN 1..${FILL_TABLES} LOOP EXECUTE format('CREATE TABLE import_fill_%s (a int, b text, c int, d int)', i); END LOOP; END $$`);
  });

  after(async () => {
    await churn?.end();
    await t?.cleanup();
  });

  it('every command starts and answers', async () => {
    let stop = false;
    let cycles = 0;
    const churning = (async () => {
      for (let i = 0; !stop; i++) {
        await churn.query(`CREATE TABLE import_churn_${i % 8} (a int, b text, c serial)`);
        await churn.query(`DROP TABLE IF EXISTS import_churn_${(i + 4) % 8}`);
        cycles++;
      }
    })();
    try {
      for (let i = 0; i < STARTS; i++) {
        const before = cycles;
        const r = await runCli(t.env, ['release', 'list']);
        assert.equal(r.code, 0, r.stderr);
        // The tables changed while the command ran: the start overlapped drops.
        assert.ok(cycles > before, 'tables were dropped while the command ran');
      }
    } finally {
      stop = true;
      await churning;
    }
  });
});
