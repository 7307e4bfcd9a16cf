/*
 * The mirror's live database as sleeve's catalogue (docs/mirror-database.md): one process at
 * a time (a lease in sleeve's `setting` table) follows the mirror's tables into sleeve's own,
 * every SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS; every serving process answers from sleeve's
 * tables and follows the catalogue version as it does for any change (cluster/catalogue-watch.ts).
 * Why following and not reading in place: docs/decisions.md, "The mirror's database: followed, not read in place".
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { DatabaseConfig } from '../../config/load.js';
import type { Db } from '../../db/schema.js';
import type { Clock } from '../../shared/clock.js';
import {
  approvedSince,
  changedRows,
  countReleaseEvents,
  deletedRows,
  emptyAffected,
  EVENT_ARCHIVE_TABLES,
  eventArtProblem,
  findsDeletes,
  followedTables,
  movedReleaseEvents,
  readSnapshot,
  readStats,
  RELEASE_EVENT_TABLES,
  withImageTypes,
  type Affected,
  type LiveTable,
  type ReleaseEventRanges,
  type ReleaseEventTable,
  type SnapshotMark,
  type TableStats,
} from './changes.js';
import { bulkReadable, bulkReadRunning, readWholeBulk } from './bulk.js';
import { readBatch, readEventBatch, readTypes, type LiveTypes, type SkipRow } from './read.js';
import { isMirrorAway, type LiveQuery, LiveSource } from './source.js';
import { writeEventBatch } from './write-events.js';
import { writeBatch, writeTypes } from './write.js';

export interface LiveLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface LiveCatalogueOptions {
  db: Db;
  /** sleeve's database (the first whole read goes through the import's backend for it: bulk.ts). */
  database: DatabaseConfig;
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
  /** The release event tables' rows counted per range of release ids at the last look (their deletions are found against them). */
  events?: Partial<Record<ReleaseEventTable, ReleaseEventRanges>>;
  /**
   * The mirror's usable image types when `image_type` was last looked at: an image of another
   * type was skipped, and is read again once its type is added (absent in a state written
   * before it was kept: then sleeve's own image types stand for it).
   */
  imageTypes?: string[];
  /** Whether the Event Art Archive's events are followed (its tables' marks are in `tables`). */
  eventArt?: boolean;
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
  /** Aborted by stop(): a whole read through the import stops at its next chunk. */
  private readonly stopping = new AbortController();
  private lease: string | undefined;
  private readonly skipped = new Set<string>();
  private synced = false;
  /** The mirror as the last pass found it. */
  status: MirrorStatus = 'not-yet';
  private lastProblem: string | undefined;
  /** Why the Event Art Archive is not followed, as last logged; undefined while it is (or not looked at yet). */
  private eventArtProblem: string | undefined;

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
    this.stopping.abort();
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
    const { stats, problem } = await this.source.snapshot(async (q) => ({ stats: await readStats(q), problem: await eventArtProblem(q) }));
    const eventArt = this.noteEventArt(problem);
    const full = state === undefined || state.source !== this.opts.name;
    // Another process reads the mirror whole through the import (its lease ran out meanwhile): not twice at once.
    if (full && (await bulkReadRunning(this.opts.db, this.opts.database))) return;
    const changed = full ? await this.readWhole(stats, eventArt) : await this.readChanges(state, stats, eventArt);
    this.synced = true;
    if (changed > 0) await this.opts.changed(changed);
  }

  /** Whether the Event Art Archive is followed; a new reason why not logged once (releases are followed all the same). */
  private noteEventArt(problem: string | undefined): boolean {
    if (problem !== undefined && problem !== this.eventArtProblem) {
      this.opts.log.warn({ mirror: this.opts.name, reason: problem }, "the mirror's database has no Event Art Archive sleeve can read: its events are not followed (sleeve's events stay as they are); releases are");
    } else if (problem === undefined && this.eventArtProblem !== undefined) {
      this.opts.log.info({ mirror: this.opts.name }, "the mirror's Event Art Archive can be read now: following its events");
    }
    this.eventArtProblem = problem;
    return problem === undefined;
  }

  /**
   * Reads and writes the releases, groups and events `affected` names, in batches, in the
   * snapshot `q` reads. A merged MBID still held by an imported entity (a merge whose old side a
   * later batch removes) notes its new side in `deferred`, written again at the pass's end
   * (applyDeferred); without `deferred` it is skipped and logged.
   */
  private async apply(q: LiveQuery, types: LiveTypes, affected: Affected, deferred?: Affected): Promise<number> {
    let changed = 0;
    const byId = (a: number, b: number) => a - b;
    const releases = [...affected.releases].sort(byId);
    const groups = [...affected.groups].sort(byId);
    for (let i = 0; i < Math.max(releases.length, groups.length); i += BATCH) {
      const batch = await readBatch(q, types, releases.slice(i, i + BATCH), groups.slice(i, i + BATCH), this.skip);
      const r = await writeBatch(this.opts.db, batch, this.opts.clock.now(), this.skip, deferred);
      changed += r.releases.length + r.groups.length;
    }
    // Events only while the Event Art Archive is followed (its art types read).
    const events = types.eventKinds === undefined ? [] : [...affected.events].sort(byId);
    for (let i = 0; i < events.length; i += BATCH) {
      const batch = await readEventBatch(q, types, events.slice(i, i + BATCH), this.skip);
      changed += (await writeEventBatch(this.opts.db, batch, this.opts.clock.now(), this.skip, deferred?.events)).length;
    }
    return changed;
  }

  /** The entities whose merged MBIDs waited for the removals of the pass, written again (what is still held now is skipped and logged). */
  private async applyDeferred(q: LiveQuery, types: LiveTypes, deferred: Affected): Promise<number> {
    return deferred.releases.size + deferred.groups.size + deferred.events.size === 0 ? 0 : this.apply(q, types, deferred);
  }

  /** Every row of the tables `pages` names read, page by page (each page in one snapshot), and written. */
  private async readPages(types: LiveTypes, pages: readonly (readonly [string, keyof Affected])[], deferred: Affected): Promise<number> {
    let changed = 0;
    for (const [table, entity] of pages) {
      let after = 0;
      for (;;) {
        const page = await this.source.snapshot(async (q) => {
          const ids = (await q<{ id: number }>(`SELECT id FROM ${table} WHERE id > $1 ORDER BY id LIMIT ${BATCH}`, [after])).map((r) => Number(r.id));
          const affected = emptyAffected();
          for (const id of ids) affected[entity].add(id);
          return { ids, changed: await this.apply(q, types, affected, deferred) };
        });
        changed += page.changed;
        if (page.ids.length < BATCH) break;
        after = page.ids[page.ids.length - 1] as number;
        // Stopping: the next start reads it whole again (nothing was recorded as read).
        if (this.stopped) throw new Error('stopped while reading the whole catalogue');
        if (!(await this.takeLease())) throw new Error('the lease went to another process while reading the whole catalogue');
      }
    }
    return changed;
  }

  /**
   * The entities rows deleted from `tables` belonged to. Asked once what was inserted and updated
   * since has been written: sleeve's counts per range then hold the new rows too, so a range's
   * new rows cannot hide a deleted one (changes.ts, deletedRows).
   */
  private async findDeletions(q: LiveQuery, tables: readonly LiveTable[]): Promise<Affected> {
    const gone = emptyAffected();
    for (const table of tables) if (findsDeletes(table)) await deletedRows(q, this.opts.db, table, gone);
    return gone;
  }

  /** What left the mirror's `tables` (compared whole, range by range), read again and written, in one snapshot; then what waited for it. */
  private async readDeletions(types: LiveTypes, tables: readonly LiveTable[], deferred: Affected): Promise<number> {
    return this.source.snapshot(async (q) => {
      const changed = await this.apply(q, types, await this.findDeletions(q, tables), deferred);
      return changed + (await this.applyDeferred(q, types, deferred));
    });
  }

  /** The marks of `tables` at a snapshot: rows written from its oldest running transaction on are read at their next scan. */
  private static marks(tables: readonly LiveTable[], snap: SnapshotMark, stats: Map<LiveTable, TableStats>): FollowState['tables'] {
    const out: FollowState['tables'] = {};
    for (const table of tables) out[table] = { from: snap.xmin, stats: stats.get(table) ?? null };
    return out;
  }

  /**
   * The whole catalogue read (the first time, or after the mirror changed): through the import
   * when sleeve holds no release, group or event made here (bulk.ts), else page by page, then
   * what left it.
   */
  private async readWhole(stats: Map<LiveTable, TableStats>, eventArt: boolean): Promise<number> {
    const t0 = this.opts.clock.now();
    this.opts.log.info({ mirror: this.opts.name }, "reading the whole catalogue from the mirror's database");
    const read = (await bulkReadable(this.opts.db)) ? await this.readWholeBulk(eventArt) : await this.readWholePages(eventArt);
    const tables = LiveCatalogue.marks(followedTables(eventArt), read.snap, stats);
    await this.saveState({ version: 1, source: this.opts.name, withEdits: read.withEdits, tables, events: read.events, imageTypes: read.imageTypes, eventArt, at: this.opts.clock.now() });
    this.opts.log.info({ mirror: this.opts.name, seconds: (this.opts.clock.now() - t0) / 1000 }, "the catalogue is the mirror's; following its changes");
    return Math.max(read.changed, 1);
  }

  private async readWholeBulk(eventArt: boolean): Promise<WholeRead> {
    const o = this.opts;
    const r = await readWholeBulk({ url: o.url, name: o.name, database: o.database, eventArt, clock: o.clock, log: o.log, skip: this.skip, signal: this.stopping.signal });
    // As the import refuses a dump without releases: a mirror still being loaded is not the catalogue yet.
    if (r === undefined) throw new MirrorNotReady("the mirror's database holds no releases yet (is it still being loaded?)");
    return { snap: r.snap, events: r.events, imageTypes: r.imageTypes, withEdits: r.withEdits, changed: 1 };
  }

  private async readWholePages(eventArt: boolean): Promise<WholeRead> {
    // The release events counted in the snapshot the marks come from: a deletion after it is found by a later pass.
    const events: FollowState['events'] = {};
    const snap = await this.source.snapshot(async (q) => {
      const [any] = await q<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM musicbrainz.release) AS any`);
      if (any?.any !== true) throw new MirrorNotReady("the mirror's database holds no releases yet (is it still being loaded?)");
      const mark = await readSnapshot(q);
      for (const table of RELEASE_EVENT_TABLES) events[table] = await countReleaseEvents(q, table);
      return mark;
    });
    const types = await this.source.snapshot((q) => readTypes(q, this.skip, eventArt));
    let changed = (await writeTypes(this.opts.db, types, this.skip)) ? 1 : 0;
    const pages = [['musicbrainz.release', 'releases'], ['musicbrainz.release_group', 'groups'], ...(eventArt ? [['musicbrainz.event', 'events']] : [])] as const;
    const deferred = emptyAffected();
    changed += await this.readPages(types, pages as readonly (readonly [string, keyof Affected])[], deferred);
    changed += await this.readDeletions(types, followedTables(eventArt), deferred);
    return { snap, events, imageTypes: [...types.imageTypes.keys()], withEdits: types.withEdits, changed };
  }

  /**
   * The Event Art Archive's events read whole, with the catalogue already followed: when the
   * mirror's archive became readable (made, loaded or granted later), or sleeve followed none before.
   */
  private async readWholeEvents(state: FollowState, stats: Map<LiveTable, TableStats>): Promise<{ state: FollowState; changed: number }> {
    this.opts.log.info({ mirror: this.opts.name }, "reading the Event Art Archive's events whole from the mirror's database");
    const snap = await this.source.snapshot((q) => readSnapshot(q));
    const types = await this.source.snapshot((q) => readTypes(q, this.skip, true));
    let changed = (await writeTypes(this.opts.db, types, this.skip)) ? 1 : 0;
    const deferred = emptyAffected();
    changed += await this.readPages(types, [['musicbrainz.event', 'events']], deferred);
    changed += await this.readDeletions(types, EVENT_ARCHIVE_TABLES, deferred);
    const next: FollowState = { ...state, tables: { ...state.tables, ...LiveCatalogue.marks(EVENT_ARCHIVE_TABLES, snap, stats) }, eventArt: true, at: this.opts.clock.now() };
    await this.saveState(next);
    return { state: next, changed: Math.max(changed, 1) };
  }

  /** One pass over what changed since the last: only the tables whose counts moved are looked at. */
  private async readChanges(state: FollowState, stats: Map<LiveTable, TableStats>, eventArt: boolean): Promise<number> {
    let before = 0;
    if (eventArt && state.eventArt !== true) ({ state, changed: before } = await this.readWholeEvents(state, stats));
    if (!eventArt && state.eventArt === true) {
      // Not followed now: read whole once it can be again (what changed meanwhile is not known).
      const tables = { ...state.tables };
      for (const t of EVENT_ARCHIVE_TABLES) delete tables[t];
      state = { ...state, tables, eventArt: false };
      await this.saveState(state);
    }
    const outcome = await this.source.snapshot((q) => this.passChanges(q, state, stats, eventArt));
    if (outcome.whole) return before + (await this.readWhole(stats, eventArt));
    if (outcome.moved.length > 0) {
      const tables = { ...state.tables };
      for (const t of outcome.moved) tables[t] = { from: outcome.snap.xmin, stats: stats.get(t) ?? null };
      const imageTypes = outcome.imageTypes === undefined ? {} : { imageTypes: outcome.imageTypes };
      await this.saveState({ ...state, tables, ...(outcome.events === undefined ? {} : { events: outcome.events }), ...imageTypes, at: this.opts.clock.now() });
    }
    return before + outcome.changed;
  }

  /** readChanges' snapshot: the moved tables' changed and deleted rows found, and what they name read again and written. */
  private async passChanges(q: LiveQuery, state: FollowState, stats: Map<LiveTable, TableStats>, eventArt: boolean): Promise<PassOutcome> {
    const snap = await readSnapshot(q);
    const moved = followedTables(eventArt).filter((t) => !sameStats(state.tables[t]?.stats ?? null, stats.get(t) ?? null));
    if (moved.length === 0) return { changed: 0, snap, moved, whole: false };
    const types = await readTypes(q, this.skip, eventArt);
    if (types.withEdits !== state.withEdits) return { changed: 0, snap, moved, whole: true };
    let changed = 0;
    const events: FollowState['events'] = { ...state.events };
    const affected = emptyAffected();
    // Before writeTypes: sleeve's image types stand for those of the last look in an older state.
    const imageTypes = moved.includes('cover_art_archive.image_type') ? await this.newImageTypes(q, state, types, eventArt, affected) : undefined;
    if (moved.some((t) => TYPE_TABLES.includes(t))) changed += (await writeTypes(this.opts.db, types, this.skip)) ? 1 : 0;
    const deletedFrom: LiveTable[] = [];
    for (const table of moved) {
      const mark = state.tables[table];
      if (mark === undefined || !(await changedRows(q, table, mark.from, snap, affected))) return { changed, snap, moved, whole: true };
      const before = mark.stats;
      const now = stats.get(table);
      const deleted = before === null || now === undefined || now[2] !== before[2];
      if (deleted) deletedFrom.push(table);
      if (deleted && (RELEASE_EVENT_TABLES as readonly string[]).includes(table)) {
        const t = table as ReleaseEventTable;
        events[t] = await movedReleaseEvents(q, this.opts.db, t, state.events?.[t], affected);
      }
    }
    if (moved.includes('musicbrainz.edit') && types.withEdits) await approvedSince(q, this.opts.db, affected, PENDING_LIMIT, eventArt);
    const tooMany = (a: Affected) => a.releases.size + a.groups.size + a.events.size > MOST_AFFECTED;
    if (tooMany(affected)) return { changed, snap, moved, whole: true };
    const deferred = emptyAffected();
    changed += await this.apply(q, types, affected, deferred);
    // Deleted rows only now, with the inserted and updated ones written (findDeletions).
    const gone = await this.findDeletions(q, deletedFrom);
    if (tooMany(gone)) return { changed, snap, moved, whole: true };
    changed += await this.apply(q, types, gone, deferred);
    changed += await this.applyDeferred(q, types, deferred);
    return { changed, snap, moved, whole: false, events, ...(imageTypes === undefined ? {} : { imageTypes }) };
  }

  /** The releases and events with images of the image types the mirror gained since the last look, into `affected`; answers the types now. */
  private async newImageTypes(q: LiveQuery, state: FollowState, types: LiveTypes, eventArt: boolean, affected: Affected): Promise<string[]> {
    const now = [...types.imageTypes.keys()];
    const before = new Set(state.imageTypes ?? (await this.opts.db.selectFrom('image_type').select('mime_type').execute()).map((t) => t.mime_type));
    await withImageTypes(q, now.filter((m) => !before.has(m)), eventArt, affected);
    return now;
  }
}

/** The tables of the types sleeve copies whole (writeTypes). */
const TYPE_TABLES: readonly LiveTable[] = ['cover_art_archive.art_type', 'cover_art_archive.image_type', 'event_art_archive.art_type'];

/** What a whole read found: the snapshot its marks come from, the release events counted in it, the image types it read with. */
interface WholeRead {
  snap: SnapshotMark;
  events: FollowState['events'];
  imageTypes: string[];
  withEdits: boolean;
  changed: number;
}

interface PassOutcome {
  changed: number;
  snap: SnapshotMark;
  moved: LiveTable[];
  /** Too much to follow by rows: the whole catalogue is read again. */
  whole: boolean;
  events?: FollowState['events'];
  /** The mirror's image types, when `image_type` moved. */
  imageTypes?: string[];
}

function sameStats(a: TableStats | null, b: TableStats | null): boolean {
  return a !== null && b !== null && a[0] === b[0] && a[1] === b[1] && a[2] === b[2];
}

