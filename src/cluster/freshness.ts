import { connect } from 'node:net';
import { hostname } from 'node:os';
import { processAlive } from '../shared/process.js';
import { sql } from 'kysely';
import type { Config, DatabaseConfig } from '../config/load.js';
import type { Db } from '../db/schema.js';
import { announceChange } from './announce.js';
import { publishCatalogue } from './mark.js';
import type { ChangeAnnouncer } from './notify.js';
import { CHANGE_CHANNEL, LIVENESS_LOCK_SPACE } from './registry.js';

export interface PublishOptions {
  db: Db;
  database: DatabaseConfig;
  /** Also announce on Redis (SLEEVE_REDIS_URL). */
  announcer?: ChangeAnnouncer | undefined;
  /** SLEEVE_CHANGE_WAIT_MS: how long to wait for the serving processes. */
  waitMs: number;
  /** For the warning: how soon a process that did not confirm sees the change anyway. */
  pollMs: number;
  pollRedisMs: number;
  warn: (message: string) => void;
}

/**
 * publishChange as the configuration says: with SLEEVE_REDIS_URL, also announced on Redis
 * through a client opened for it (loaded only then, so other setups do not pay for it).
 */
export async function publishConfiguredChange(config: Readonly<Config>, db: Db, warn: (message: string) => void): Promise<void> {
  const announcer = config.redisUrl === undefined ? undefined : new (await import('./notify.js')).ChangeAnnouncer(config.redisUrl);
  try {
    await publishChange({
      db,
      database: config.database,
      announcer,
      waitMs: config.changeWaitMs,
      pollMs: config.changePollMs,
      pollRedisMs: config.changePollRedisMs,
      warn,
    });
  } finally {
    announcer?.close();
  }
}

interface ServingRow {
  id: string;
  host: string;
  pid: number;
  address: string;
  signal: string | null;
  acked: number;
}

/** How often a command looks at the acknowledgements on PostgreSQL while it waits. */
const ACK_POLL_MS = 10;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Read-your-writes for the operator (docs/decisions.md, "Freshness"): after a command's
 * change is done (committed, index.json files written), publish it (a new catalogue mark),
 * push it to every serving process on this database (PostgreSQL NOTIFY, or a loopback
 * signal with SQLite, plus Redis when configured), and wait until each living process has
 * emptied its caches at that mark, at most `waitMs`. Processes that do not confirm in time
 * are named in a warning; the command still succeeds (its change is saved).
 */
export async function publishChange(opts: PublishOptions): Promise<void> {
  const mark = await publishCatalogue(opts.db);
  if (opts.announcer !== undefined) await announceChange(opts.announcer, opts.pollRedisMs, mark, opts.warn);
  if (opts.database.kind === 'postgres') await sql`select pg_notify(${CHANGE_CHANNEL}, ${String(mark)})`.execute(opts.db);
  // SLEEVE_CHANGE_WAIT_MS=0: no waiting (the processes see the change by NOTIFY, Redis or their poll).
  if (opts.waitMs === 0) return;
  const deadline = Date.now() + opts.waitMs;
  const late = opts.database.kind === 'postgres' ? await waitPostgres(opts.db, mark, deadline) : await waitSqlite(opts.db, mark, deadline);
  if (late.length === 0) return;
  const who = late.map((r) => `pid ${r.pid} on ${r.host} (${r.address})`).join(', ');
  const poll = opts.announcer !== undefined ? `SLEEVE_CHANGE_POLL_REDIS_MS, ${opts.pollRedisMs} ms` : `SLEEVE_CHANGE_POLL_MS, ${opts.pollMs} ms`;
  opts.warn(
    `the change is saved, but ${late.length === 1 ? '1 serving process' : `${late.length} serving processes`} did not confirm it within ` +
      `${opts.waitMs} ms (SLEEVE_CHANGE_WAIT_MS): ${who}. Until it does, it may answer from before the change ` +
      `(a running process catches up at its next look at the database, ${poll}; a hung one once it runs again).`,
  );
}

/**
 * PostgreSQL (after the NOTIFY): read `acked` of every process whose liveness lock is held (a row
 * whose lock nobody holds is a process that died without removing it: removed here).
 */
async function waitPostgres(db: Db, mark: number, deadline: number): Promise<ServingRow[]> {
  for (let first = true; ; first = false) {
    const rows = (
      await sql<ServingRow & { alive: boolean }>`
        select s.id, s.host, s.pid, s.address, s.signal, s.acked,
          exists (select 1 from pg_locks l
                  where l.locktype = 'advisory' and l.granted and l.objsubid = 2
                    and l.database = (select oid from pg_database where datname = current_database())
                    and l.classid::bigint = ${LIVENESS_LOCK_SPACE} and l.objid::bigint = s.lock_key) as alive
        from serving_process s`.execute(db)
    ).rows;
    if (first) {
      const dead = rows.filter((r) => !r.alive).map((r) => r.id);
      if (dead.length > 0) await db.deleteFrom('serving_process').where('id', 'in', dead).where('started_at', '<', Date.now() - 10_000).execute();
    }
    const late = rows.filter((r) => r.alive && Number(r.acked) < mark);
    if (late.length === 0 || Date.now() >= deadline) return late;
    await sleep(Math.min(ACK_POLL_MS, Math.max(0, deadline - Date.now())));
  }
}

/**
 * SQLite: every serving process is on this machine; signal each on its loopback port and
 * wait for its answer. A refused connection (or another sleeve process on that port) means
 * the process is gone: its row is removed.
 */
async function waitSqlite(db: Db, mark: number, deadline: number): Promise<ServingRow[]> {
  const rows = await db.selectFrom('serving_process').select(['id', 'host', 'pid', 'address', 'signal', 'acked']).execute();
  const outcomes = await Promise.all(rows.map((r) => (r.signal === null ? Promise.resolve<Outcome>('gone') : signal(r.signal, r.id, mark, deadline))));
  // A refused signal proves a process gone only where its pid can be checked: a command in another
  // network or pid namespace (a container sharing the database file) must not forget a live server.
  const provablyGone = (r: ServingRow): boolean => r.host === hostname() && !processAlive(r.pid);
  for (const [i, r] of rows.entries()) if (outcomes[i] === 'gone' && r.signal !== null && !provablyGone(r)) outcomes[i] = 'late';
  const gone = rows.filter((_, i) => outcomes[i] === 'gone').map((r) => r.id);
  if (gone.length > 0) await db.deleteFrom('serving_process').where('id', 'in', gone).execute();
  return rows.filter((_, i) => outcomes[i] === 'late');
}

type Outcome = 'done' | 'late' | 'gone';

/** One change signal: `{id} {mark}\n` out, the mark the process now follows back. */
function signal(address: string, id: string, mark: number, deadline: number): Promise<Outcome> {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon);
  const port = Number(address.slice(colon + 1));
  return new Promise((resolve) => {
    let answer = '';
    let settled = false;
    const socket = connect({ host, port });
    const finish = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => finish('late'), Math.max(0, deadline - Date.now()));
    socket.setEncoding('latin1');
    socket.on('connect', () => socket.write(`${id} ${mark}\n`));
    socket.on('data', (chunk: string) => {
      answer += chunk;
      if (answer.length > 64) finish('late');
    });
    socket.on('end', () => {
      const line = answer.trim();
      if (/^\d{1,15}$/.test(line)) finish(Number(line) >= mark ? 'done' : 'late');
      // Another sleeve process on that port now: this one is gone. Anything else: not confirmed.
      else finish(line === 'unknown' ? 'gone' : 'late');
    });
    socket.on('error', (err: NodeJS.ErrnoException) => finish(err.code === 'ECONNREFUSED' ? 'gone' : 'late'));
  });
}
