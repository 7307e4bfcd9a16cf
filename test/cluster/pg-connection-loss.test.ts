/*
 * The PostgreSQL pool when the server ends a session (as a restart does) while sleeve holds
 * that connection between two queries: the process must survive (pg emits an 'error' event
 * that nothing else listens to), the next query on it fails, and the pool carries on with
 * a new connection. A deterministic version of what the restart test can hit by chance.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { loadConfig } from '../../src/config/load.js';
import { openDatabase, type DatabaseHandle } from '../../src/db/connect.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';

describe(`the PostgreSQL pool survives a session ended by the server (${DIALECT})`, { skip: DIALECT !== 'postgres' && 'runs on the PostgreSQL pass' }, () => {
  let t: TestEnv;
  let handle: DatabaseHandle;

  before(async () => {
    t = await makeTestEnv();
    handle = await openDatabase(loadConfig(t.env).database);
  });

  after(async () => {
    await handle?.close();
    await t?.cleanup();
  });

  it('a connection held between queries when its session is terminated fails its next query, and the pool recovers', async () => {
    const failure = await handle.db.connection().execute(async (conn) => {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(conn);
      const admin = new pg.Client({ connectionString: t.env.SLEEVE_DATABASE_URL });
      await admin.connect();
      await admin.query('select pg_terminate_backend($1)', [rows[0]?.pid]);
      // Until the session is gone on the server (its end then reaches the client while it runs no query).
      await waitFor(async () => Number((await admin.query('select count(*) as n from pg_stat_activity where pid = $1', [rows[0]?.pid])).rows[0].n) === 0, { what: 'the session to end' });
      await admin.end();
      return sql`select 1`.execute(conn).then(
        () => 'answered',
        (err: Error) => err.message,
      );
    });
    assert.match(failure, /not queryable|terminat/);
    const { rows } = await sql<{ x: number }>`select 1 as x`.execute(handle.db);
    assert.equal(rows[0]?.x, 1, 'a new connection serves the next query');
  });
});
