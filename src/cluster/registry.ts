import { randomBytes, randomInt } from 'node:crypto';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import { hostname } from 'node:os';
import type { DatabaseConfig } from '../config/load.js';
import type { Db } from '../db/schema.js';
import type { CatalogueWatch } from './catalogue-watch.js';
import type { Log } from './redis.js';

/** The PostgreSQL channel on which commands announce catalogue changes. */
export const CHANGE_CHANNEL = 'sleeve_catalogue';
/** First key of the advisory locks serving processes hold while they live ("slee"). */
export const LIVENESS_LOCK_SPACE = 0x736c6565;

/** Longest line a change signal may send (`{id} {mark}\n`). */
const MAX_SIGNAL_LINE = 64;
/** A signal connection that says nothing for this long is closed. */
const SIGNAL_IDLE_MS = 5000;
/** Signal connections taken at once; more are refused (commands retry by the poll's bound). */
const MAX_SIGNAL_CONNECTIONS = 32;
/** Pause between attempts to get the PostgreSQL notification session back. */
const RECONNECT_MS = 1000;

export interface RegistrationOptions {
  db: Db;
  database: DatabaseConfig;
  watch: CatalogueWatch;
  /** The cover art listener's address, named in commands' warnings (replaced by `setAddress` once listening). */
  address: string;
  log: Log;
}

/**
 * A serving process's entry in `serving_process`: what lets a catalogue command wait until
 * this process shows its change (docs/decisions.md, "Freshness").
 *
 * - SQLite (every process on one machine): a loopback listener; a command connects, sends
 *   `{id} {mark}\n`, and gets back, once the caches were emptied after a fresh read of the
 *   mark, `{mark}\n`. A refused connection tells the command the process is gone.
 * - PostgreSQL: a session of its own that LISTENs on `sleeve_catalogue` and holds an
 *   advisory lock (how commands tell a living process from a row left by a crash); on a
 *   notification, or whenever the poll finds a newer mark, the process writes the mark it
 *   now follows into `acked`, which the command reads.
 */
export class ServingRegistration {
  readonly id = randomBytes(8).toString('hex');
  private readonly opts: RegistrationOptions;
  private signalServer: NetServer | undefined;
  private pgSession: PgSession | undefined;
  private address: string;

  constructor(opts: RegistrationOptions) {
    this.opts = opts;
    this.address = opts.address;
  }

  /** Opens the signal path and writes the row; call before the listener takes requests. */
  async start(): Promise<void> {
    const { database, watch } = this.opts;
    let signal: string | null = null;
    let lockKey: number | null = null;
    if (database.kind === 'sqlite') {
      this.signalServer = await listenForSignals(this.id, watch);
      const addr = this.signalServer.address();
      if (addr === null || typeof addr === 'string') throw new Error('change signal listener has no port');
      signal = `127.0.0.1:${addr.port}`;
    } else {
      // After a lost session, the row is written again: a command may have taken it for a crashed process's.
      this.pgSession = new PgSession(database.url, this.opts, (key) => this.writeRow(null, key));
      lockKey = await this.pgSession.start();
    }
    if (database.kind === 'postgres') watch.onAdvance((mark) => void this.ack(mark));
    await this.writeRow(signal, lockKey);
  }

  private async writeRow(signal: string | null, lockKey: number | null): Promise<void> {
    const acked = await this.opts.watch.refresh();
    const row = { host: hostname(), pid: process.pid, address: this.address, signal, lock_key: lockKey, acked };
    await this.opts.db
      .insertInto('serving_process')
      .values({ id: this.id, ...row, started_at: Date.now() })
      .onConflict((oc) => oc.column('id').doUpdateSet(row))
      .execute();
    // A mark reached while the row was being written was acknowledged to no row: again, now.
    const mark = this.opts.watch.mark;
    if (lockKey !== null && mark !== undefined && mark > acked) await this.ack(mark);
  }

  /** PostgreSQL: the caches follow `mark` now. */
  private async ack(mark: number): Promise<void> {
    await this.opts.db
      .updateTable('serving_process')
      .set({ acked: mark })
      .where('id', '=', this.id)
      .where('acked', '<', mark)
      .execute()
      .catch((err: unknown) => this.opts.log.warn({ err }, 'could not acknowledge a catalogue change'));
  }

  /** The address commands name in warnings may only be known once listening. */
  async setAddress(address: string): Promise<void> {
    this.address = address;
    await this.opts.db.updateTable('serving_process').set({ address }).where('id', '=', this.id).execute();
  }

  async stop(): Promise<void> {
    // The session first: a reconnection under way would write the row again after its removal.
    await this.pgSession?.close();
    await this.opts.db
      .deleteFrom('serving_process')
      .where('id', '=', this.id)
      .execute()
      .catch(() => {});
    const server = this.signalServer;
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** The loopback listener of a SQLite server: each connection is one signal, answered once the caches follow its mark. */
async function listenForSignals(id: string, watch: CatalogueWatch): Promise<NetServer> {
  const server = createServer((socket: Socket) => {
    socket.setTimeout(SIGNAL_IDLE_MS, () => socket.destroy());
    socket.on('error', () => {});
    let line = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      line += chunk;
      const end = line.indexOf('\n');
      if (end === -1) {
        if (line.length > MAX_SIGNAL_LINE) socket.destroy();
        return;
      }
      socket.removeAllListeners('data');
      const [who] = line.slice(0, end).split(' ');
      if (who !== id) {
        socket.end('unknown\n');
        return;
      }
      // The mark is read from the database, not taken from the message: the message only wakes the watch.
      watch.refresh().then(
        (mark) => socket.end(`${mark}\n`),
        // The database did not answer: not confirmed (the command names this process), but still registered.
        () => socket.end('error\n'),
      );
    });
  });
  server.maxConnections = MAX_SIGNAL_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.unref();
  return server;
}

type PgClient = import('pg').Client;

/**
 * The PostgreSQL session a serving process keeps for changes: it LISTENs and holds the
 * liveness lock. Lost (a restart of PostgreSQL, a network cut), it is made again every
 * second; on return the watch re-reads the mark, since notifications sent meanwhile are lost.
 */
class PgSession {
  private readonly url: string;
  private readonly opts: RegistrationOptions;
  private readonly reconnected: (lockKey: number) => Promise<void>;
  private client: PgClient | undefined;
  private lockKey = 0;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
  /** A reconnection under way, which close waits for (it then lets that session go). */
  private connecting: Promise<void> | undefined;

  constructor(url: string, opts: RegistrationOptions, reconnected: (lockKey: number) => Promise<void>) {
    this.url = url;
    this.opts = opts;
    this.reconnected = reconnected;
  }

  /** Connects, listens and takes a liveness lock; answers its key. */
  async start(): Promise<number> {
    await this.connect(true);
    return this.lockKey;
  }

  private async connect(first: boolean): Promise<void> {
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: this.url, application_name: 'sleeve-serve-changes', keepAlive: true });
    client.on('error', () => {});
    try {
      await client.connect();
      // A key no other session holds (a collision among a few random 31-bit keys is unlikely;
      // checked anyway). A new one after a reconnection: the old session may linger a while.
      for (;;) {
        const key = randomInt(1, 2 ** 31 - 1);
        const got = await client.query<{ ok: boolean }>('select pg_try_advisory_lock($1::int, $2::int) as ok', [LIVENESS_LOCK_SPACE, key]);
        if (got.rows[0]?.ok === true) {
          this.lockKey = key;
          break;
        }
      }
      await client.query(`LISTEN ${CHANGE_CHANNEL}`);
    } catch (err) {
      await client.end().catch(() => {});
      throw err;
    }
    if (this.closed) {
      // Closed while connecting: this session would otherwise outlive close and hold the process open.
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    client.on('notification', () => {
      void this.opts.watch.refresh().catch(() => {});
    });
    client.once('end', () => {
      if (this.closed) return;
      this.client = undefined;
      this.opts.log.warn({}, 'catalogue watch: the PostgreSQL session for change notifications was lost; reconnecting');
      this.reconnect();
    });
    if (!first) {
      // Notifications sent meanwhile are lost: writing the row again reads the mark afresh. If
      // that fails, this session is let go before the next try makes another (no leaked sessions).
      await this.reconnected(this.lockKey).catch(async (err: unknown) => {
        client.removeAllListeners('end');
        client.removeAllListeners('notification');
        this.client = undefined;
        await client.end().catch(() => {});
        throw err;
      });
      this.opts.log.info({}, 'catalogue watch: change notifications from PostgreSQL resumed');
    }
  }

  private reconnect(): void {
    if (this.closed) return;
    this.retry = setTimeout(() => {
      const connecting = this.connect(false);
      this.connecting = connecting;
      connecting
        .catch(() => this.reconnect())
        .finally(() => {
          if (this.connecting === connecting) this.connecting = undefined;
        });
    }, RECONNECT_MS);
    this.retry.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    await this.connecting?.catch(() => {});
    await this.client?.end().catch(() => {});
  }
}
