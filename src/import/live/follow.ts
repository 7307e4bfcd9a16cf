/*
 * The mirror's live database as sleeve's catalogue (docs/mirror-database.md): one process at
 * a time (a lease in sleeve's `setting` table) follows the mirror's tables into sleeve's own,
 * every SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS; every serving process answers from sleeve's
 * tables and follows the catalogue version as it does for any change (cluster/catalogue-watch.ts).
 * Why following and not reading in place: docs/decisions.md, "The mirror's database: followed, not read in place".
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Db } from '../../db/schema.js';
import type { Clock } from '../../shared/clock.js';
import { approvedSince, changedRows, countEvents, deletedRows, emptyAffected, EVENT_TABLES, findsDeletes, LIVE_TABLES, movedEvents, type EventRanges, type EventTable, readSnapshot, readStats, type Affected, type LiveTable, type TableStats } from './changes.js';
import { readBatch, readTypes, type LiveTypes, type SkipRow } from './read.js';
import { isMirrorAway, type LiveQuery, LiveSource } from './source.js';
import { writeBatch, writeTypes } from './write.js';

export interface LiveLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface LiveCatalogueOptions {
  db: Db;
  url: string;
  /** The mirror as named in logs and in the state (no credentials). */
  name: string;
  pollMs: number;
  statementTimeoutMs: number;
  clock: Clock;
  log: LiveLog;
  /** After a pass changed the catalogue (committed): rewrite the listings marked and tell the serving processes. */
  changed(releases: number): Promise<void>;
}

/** Where the follower's progress is kept (`setting` rows). */
const STATE_KEY = 'live_catalogue';
const LEASE_KEY = 'live_catalogue_lease';
/** Releases (or groups) read and written per transaction. */
const BATCH = 500;
/** Images waiting for approval looked at per pass. */
const PENDING_LIMIT = 50_000;
/** Rows not taken that are remembered (each is logged once). */
const SKIPS_KEPT = 10_000;
/** Releases and groups one pass reads again at most; more (a long outage): the whole catalogue is read again, page by page. */
const MOST_AFFECTED = 200_000;

interface TableMark {
  /** Rows written by transactions from this one on are read at the table's next scan. */
  from: string;
  stats: TableStats | null;
}

interface FollowState {
  version: 1;
  source: string;
  withEdits: boolean;
  tables: Partial<Record<LiveTable, TableMark>>;
  /** The event tables' rows counted per range of release ids at the last look (their deletions are found against them). */
  events?: Partial<Record<EventTable, EventRanges>>;
  /** When the last pass ended (epoch ms). */
  at: number;
}

/** The mirror's database answers but is not a catalogue yet. */
class MirrorNotReady extends Error {}

export type MirrorStatus = 'ok' | 'unreachable' | 'failing' | 'not-yet';

export class LiveCatalogue {
  private readonly opts: LiveCatalogueOptions;
  readonly source: LiveSource;
  private readonly holder = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private lease: string | undefined;
  private readonly skipped = new Set<string>();
  private synced = false;
  /** The mirror as the last pass found it. */
  status: MirrorStatus = 'not-yet';
  private lastProblem: string | undefined;

  constructor(opts: LiveCatalogueOptions) {
    this.opts = opts;
    this.source = new LiveSource(opts.url, opts.statementTimeoutMs);
  }

  /** Whether sleeve's tables hold the mirror's catalogue (read whole once, by this process or another). */
  get ready(): boolean {
    return this.synced;
  }

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.running = this.pass().finally(() => {
        this.running = undefined;
        if (!this.stopped) this.timer = setTimeout(tick, this.opts.pollMs);
      });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    await this.running;
    if (this.lease !== undefined) await this.casLease(this.lease, `- 0`).catch(() => {});
    await this.source.close().catch(() => {});
  }

  /** One pass: the state read; with the lease, the mirror's changes followed. Never throws. */
  private async pass(): Promise<void> {
    try {
      const state = await this.loadState();
      this.synced = state !== undefined && state.source === this.opts.name;
      if (!(await this.takeLease())) return;
      await this.follow(state);
      this.recovered();
    } catch (err) {
      this.failed(err);
    }
  }

  private recovered(): void {
    if (this.status !== 'ok' && this.lastProblem !== undefined) this.opts.log.info({ mirror: this.opts.name }, "the mirror's database answers again; following its changes");
    this.status = 'ok';
    this.lastProblem = undefined;
  }

  private failed(err: unknown): void {
    if (this.stopped) return;
    const away = isMirrorAway(err) || err instanceof MirrorNotReady;
    const message = (err as Error)?.message ?? String(err);
    this.status = away ? 'unreachable' : 'failing';
    // One line per outage or per new problem, not one per poll.
    if (this.lastProblem === message) return;
    this.lastProblem = message;
    if (away) {
      this.opts.log.warn(
        { mirror: this.opts.name, err: message },
        this.synced ? "the mirror's database is unreachable; answering from the catalogue as last read, retrying" : "the mirror's database is unreachable; the catalogue answers 503 until it has been read once, retrying",
      );
    } else if ((err as { code?: string })?.code === '42P01' || (err as { code?: string })?.code === '3F000') {
      // An operator's mistake, said in one line: no stack.
      this.opts.log.error({ mirror: this.opts.name, err: message }, "the mirror's database lacks MusicBrainz's tables (is SLEEVE_MUSICBRAINZ_DATABASE_URL the mirror's musicbrainz_db?); retrying");
    } else this.opts.log.error({ mirror: this.opts.name, err }, "following the mirror's database failed; retrying");
  }

  /** A row sleeve does not take: logged once, then skipped. */
  private readonly skip: SkipRow = (what, key) => {
    const k = `${what}\u0000${key}`;
    if (this.skipped.has(k)) return;
    if (this.skipped.size >= SKIPS_KEPT) return;
    this.skipped.add(k);
    this.opts.log.warn({ mirror: this.opts.name, row: key }, `row of the mirror's database skipped: ${what}`);
  };

  private async loadState(): Promise<FollowState | undefined> {
    const row = await this.opts.db.selectFrom('setting').select('value').where('name', '=', STATE_KEY).executeTakeFirst();
    if (row === undefined) return undefined;
    try {
      const s = JSON.parse(row.value) as FollowState;
      return s.version === 1 ? s : undefined;
    } catch {
      return undefined;
    }
  }

  private async saveState(state: FollowState): Promise<void> {
    const value = JSON.stringify(state);
    await this.opts.db
      .insertInto('setting')
      .values({ name: STATE_KEY, value })
      .onConflict((oc) => oc.column('name').doUpdateSet({ value }))
      .execute();
  }

  /** Takes or renews the lease (holder and expiry in one `setting` row, changed by compare-and-set). */
  private async takeLease(): Promise<boolean> {
    const now = this.opts.clock.now();
    const row = await this.opts.db.selectFrom('setting').select('value').where('name', '=', LEASE_KEY).executeTakeFirst();
    const [holder = '-', until = '0'] = (row?.value ?? '').split(' ');
    if (holder !== this.holder && Number(until) > now) {
      this.lease = undefined;
      return false;
    }
    const length = Math.max(60_000, 3 * this.opts.pollMs);
    // Held, with more than half of it left: not written again (no write per poll).
    if (holder === this.holder && row?.value === this.lease && Number(until) - now > length / 2) return true;
    const next = `${this.holder} ${now + length}`;
    if (row === undefined) {
      await this.opts.db.insertInto('setting').values({ name: LEASE_KEY, value: next }).onConflict((oc) => oc.column('name').doNothing()).execute();
      const now2 = await this.opts.db.selectFrom('setting').select('value').where('name', '=', LEASE_KEY).executeTakeFirst();
      this.lease = now2?.value === next ? next : undefined;
    } else this.lease = (await this.casLease(row.value, next)) ? next : undefined;
    return this.lease !== undefined;
  }

  private async casLease(from: string, to: string): Promise<boolean> {
    const r = await this.opts.db.updateTable('setting').set({ value: to }).where('name', '=', LEASE_KEY).where('value', '=', from).executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }

  private async follow(state: FollowState | undefined): Promise<void> {
    // Counted before the snapshot: whatever they count is in it (changes.ts).
    const stats = await this.source.snapshot((q) => readStats(q));
    const full = state === undefined || state.source !== this.opts.name;
    const changed = full ? await this.readWhole(stats) : await this.readChanges(state, stats);
    this.synced = true;
    if (changed > 0) await this.opts.changed(changed);
  }

  /** Reads and writes the releases and groups `affected` names, in batches, in the snapshot `q` reads. */
  private async apply(q: LiveQuery, types: LiveTypes, affected: Affected): Promise<number> {
    let changed = 0;
    const releases = [...affected.releases].sort((a, b) => a - b);
    const groups = [...affected.groups].sort((a, b) => a - b);
    for (let i = 0; i < Math.max(releases.length, groups.length); i += BATCH) {
      const batch = await readBatch(q, types, releases.slice(i, i + BATCH), groups.slice(i, i + BATCH), this.skip);
      const r = await writeBatch(this.opts.db, batch, this.opts.clock.now(), this.skip);
      changed += r.releases.length + r.groups.length;
    }
    return changed;
  }

  /** The whole catalogue read (the first time, or after the mirror changed): page by page, then what left it. */
  private async readWhole(stats: Map<LiveTable, TableStats>): Promise<number> {
    const t0 = this.opts.clock.now();
    this.opts.log.info({ mirror: this.opts.name }, "reading the whole catalogue from the mirror's database");
    // The events counted in the snapshot the marks come from: a deletion after it is found by a later pass.
    const events: FollowState['events'] = {};
    const snap = await this.source.snapshot(async (q) => {
      // As the import refuses a dump without releases: a mirror still being loaded is not the catalogue yet.
      const [any] = await q<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM musicbrainz.release) AS any`);
      if (any?.any !== true) throw new MirrorNotReady("the mirror's database holds no releases yet (is it still being loaded?)");
      const mark = await readSnapshot(q);
      for (const table of EVENT_TABLES) events[table] = await countEvents(q, table);
      return mark;
    });
    const types = await this.source.snapshot((q) => readTypes(q, this.skip));
    let changed = (await writeTypes(this.opts.db, types, this.skip)) ? 1 : 0;
    for (const [table, entity] of [
      ['musicbrainz.release', 'releases'],
      ['musicbrainz.release_group', 'groups'],
    ] as const) {
      let after = 0;
      for (;;) {
        const page = await this.source.snapshot(async (q) => {
          const ids = (await q<{ id: number }>(`SELECT id FROM ${table} WHERE id > $1 ORDER BY id LIMIT ${BATCH}`, [after])).map((r) => Number(r.id));
          const affected = emptyAffected();
          for (const id of ids) affected[entity].add(id);
          return { ids, changed: await this.apply(q, types, affected) };
        });
        changed += page.changed;
        if (page.ids.length < BATCH) break;
        after = page.ids[page.ids.length - 1] as number;
        // Stopping: the next start reads the whole catalogue again (nothing was recorded as read).
        if (this.stopped) throw new Error('stopped while reading the whole catalogue');
        if (!(await this.takeLease())) throw new Error('the lease went to another process while reading the whole catalogue');
      }
    }
    changed += await this.source.snapshot(async (q) => {
      const affected = emptyAffected();
      for (const table of LIVE_TABLES) if (findsDeletes(table)) await deletedRows(q, this.opts.db, table, affected);
      return this.apply(q, types, affected);
    });
    const tables: FollowState['tables'] = {};
    for (const table of LIVE_TABLES) tables[table] = { from: snap.xmin, stats: stats.get(table) ?? null };
    await this.saveState({ version: 1, source: this.opts.name, withEdits: types.withEdits, tables, events, at: this.opts.clock.now() });
    this.opts.log.info({ mirror: this.opts.name, seconds: (this.opts.clock.now() - t0) / 1000 }, "the catalogue is the mirror's; following its changes");
    return Math.max(changed, 1);
  }

  /** One pass over what changed since the last: only the tables whose counts moved are looked at. */
  private async readChanges(state: FollowState, stats: Map<LiveTable, TableStats>): Promise<number> {
    const outcome = await this.source.snapshot(async (q) => {
      const snap = await readSnapshot(q);
      const moved = LIVE_TABLES.filter((t) => !sameStats(state.tables[t]?.stats ?? null, stats.get(t) ?? null));
      if (moved.length === 0) return { changed: 0, snap, moved, whole: false };
      const types = await readTypes(q, this.skip);
      if (types.withEdits !== state.withEdits) return { changed: 0, snap, moved, whole: true };
      let changed = 0;
      const events: FollowState['events'] = { ...state.events };
      if (moved.includes('cover_art_archive.art_type') || moved.includes('cover_art_archive.image_type')) changed += (await writeTypes(this.opts.db, types, this.skip)) ? 1 : 0;
      const affected = emptyAffected();
      for (const table of moved) {
        const mark = state.tables[table];
        if (mark === undefined || !(await changedRows(q, table, mark.from, snap, affected))) return { changed, snap, moved, whole: true };
        const before = mark.stats;
        const now = stats.get(table);
        const deleted = before === null || now === undefined || now[2] !== before[2];
        if (deleted && findsDeletes(table)) await deletedRows(q, this.opts.db, table, affected);
        if (deleted && (EVENT_TABLES as readonly string[]).includes(table)) {
          events[table as EventTable] = await movedEvents(q, this.opts.db, table as EventTable, state.events?.[table as EventTable], affected);
        }
      }
      if (moved.includes('musicbrainz.edit') && types.withEdits) await approvedSince(q, this.opts.db, affected, PENDING_LIMIT);
      if (affected.releases.size + affected.groups.size > MOST_AFFECTED) return { changed, snap, moved, whole: true };
      changed += await this.apply(q, types, affected);
      return { changed, snap, moved, whole: false, events };
    });
    if (outcome.whole) return this.readWhole(stats);
    if (outcome.moved.length > 0) {
      const tables = { ...state.tables };
      for (const t of outcome.moved) tables[t] = { from: outcome.snap.xmin, stats: stats.get(t) ?? null };
      await this.saveState({ ...state, tables, ...(outcome.events === undefined ? {} : { events: outcome.events }), at: this.opts.clock.now() });
    }
    return outcome.changed;
  }
}

function sameStats(a: TableStats | null, b: TableStats | null): boolean {
  return a !== null && b !== null && a[0] === b[0] && a[1] === b[1] && a[2] === b[2];
}

