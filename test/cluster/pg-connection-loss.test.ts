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
      await admin.end();
      // Time for the termination to reach the client while it runs no query.
      await new Promise((r) => setTimeout(r, 300));
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
