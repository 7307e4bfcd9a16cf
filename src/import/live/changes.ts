/*
 * What changed in the mirror's tables since sleeve last looked, without reading every row
 * (docs/mirror-database.md, "How changes are found"):
 *
 * - whether a table changed at all: its insert, update and delete counts in
 *   pg_stat_user_tables, read before the snapshot the pass reads in;
 * - which rows were inserted or updated: those whose xmin (the transaction that wrote them)
 *   is at or after the oldest transaction still running at the last pass that scanned the
 *   table (a table's own high-water mark, moved only when it is scanned);
 * - which rows were deleted: the table's keys counted per range on both sides, and only the
 *   ranges whose counts differ compared key by key; of the release event tables, of which
 *   sleeve keeps no rows, each range's count and key fingerprint against those of the last look.
 *
 * Each finding is a release, release group or event to read again (read.ts, write.ts,
 * write-events.ts).
 */
import { sql } from 'kysely';
import type { Db } from '../../db/schema.js';
import type { LiveQuery } from './source.js';

/** The tables sleeve reads, as pg_stat_user_tables names them. */
export const LIVE_TABLES = [
  'musicbrainz.release',
  'musicbrainz.release_group',
  'musicbrainz.release_country',
  'musicbrainz.release_unknown_country',
  'musicbrainz.release_gid_redirect',
  'musicbrainz.release_group_gid_redirect',
  'musicbrainz.edit',
  'cover_art_archive.cover_art',
  'cover_art_archive.cover_art_type',
  'cover_art_archive.release_group_cover_art',
  'cover_art_archive.art_type',
  'cover_art_archive.image_type',
  'musicbrainz.event',
  'musicbrainz.event_gid_redirect',
  'event_art_archive.event_art',
  'event_art_archive.event_art_type',
  'event_art_archive.art_type',
] as const;
export type LiveTable = (typeof LIVE_TABLES)[number];

/** The tables of the Event Art Archive's events: followed only when the mirror has all of them and sleeve may read them. */
export const EVENT_ARCHIVE_TABLES: readonly LiveTable[] = ['musicbrainz.event', 'musicbrainz.event_gid_redirect', 'event_art_archive.event_art', 'event_art_archive.event_art_type', 'event_art_archive.art_type'];

/** The tables sleeve follows: the Event Art Archive's only when `eventArt`. */
export function followedTables(eventArt: boolean): LiveTable[] {
  return LIVE_TABLES.filter((t) => eventArt || !EVENT_ARCHIVE_TABLES.includes(t));
}

/**
 * Why the Event Art Archive cannot be followed (a table missing, or not readable by sleeve's
 * role), or undefined when it can. Asked of the catalog, so a missing schema costs no error.
 */
export async function eventArtProblem(q: LiveQuery): Promise<string | undefined> {
  const rows = await q<{ name: string; readable: boolean }>(
    `SELECT n.nspname || '.' || c.relname AS name, has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'SELECT') AS readable
       FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname || '.' || c.relname = ANY($1::text[]) AND c.relkind IN ('r', 'p', 'v', 'f')`,
    [EVENT_ARCHIVE_TABLES],
  );
  const found = new Map(rows.map((r) => [r.name, r.readable]));
  const missing = EVENT_ARCHIVE_TABLES.filter((t) => !found.has(t));
  if (missing.length > 0) return `${missing.join(', ')} not in the mirror's database`;
  const unreadable = EVENT_ARCHIVE_TABLES.filter((t) => found.get(t) !== true);
  if (unreadable.length > 0) return `${unreadable.join(', ')} not readable by sleeve's role (GRANT USAGE on the schema, SELECT on the table)`;
  return undefined;
}

/** [inserted, updated, deleted] rows, as counted by the statistics collector. */
export type TableStats = [number, number, number];

export async function readStats(q: LiveQuery): Promise<Map<LiveTable, TableStats>> {
  // Without counts (track_counts off) every table is looked at on every pass.
  const [setting] = await q<{ on: string }>(`SELECT current_setting('track_counts') AS on`);
  if (setting?.on !== 'on') return new Map();
  const rows = await q<{ name: LiveTable; ins: number; upd: number; del: number }>(
    `SELECT schemaname || '.' || relname AS name, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_del AS del
       FROM pg_stat_user_tables WHERE schemaname || '.' || relname = ANY($1::text[])`,
    [LIVE_TABLES as readonly string[]],
  );
  return new Map(rows.map((r) => [r.name, [Number(r.ins), Number(r.upd), Number(r.del)]]));
}

/** The snapshot a pass reads in: its xmin and xmax (64-bit transaction ids, as decimal text). */
export interface SnapshotMark {
  xmin: string;
  xmax: string;
}

export async function readSnapshot(q: LiveQuery): Promise<SnapshotMark> {
  const [row] = await q<SnapshotMark>(`SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin, pg_snapshot_xmax(pg_current_snapshot())::text AS xmax`);
  if (row === undefined) throw new Error('no snapshot');
  return row;
}

/** Transaction ids a 32-bit xmin can be compared across: beyond this, the table is read whole again. */
const MAX_WINDOW = 2n ** 31n - 1_000_000n;

/**
 * A SQL condition on `alias`'s xmin: written by a transaction from `from` (64-bit) up to the
 * snapshot's xmax. xmin is 32 bits and wraps, so the condition compares in 32-bit space.
 */
function xminSince(alias: string, from: string, snap: SnapshotMark): string | undefined {
  const lo = BigInt(from);
  const hi = BigInt(snap.xmax);
  if (hi - lo > MAX_WINDOW || hi < lo) return undefined;
  const lo32 = lo % 2n ** 32n;
  const hi32 = hi % 2n ** 32n;
  const x = `(${alias}.xmin::text::bigint)`;
  // Ids 0-2 are special (frozen, bootstrap): never a change.
  return lo32 <= hi32 ? `(${x} >= ${lo32} AND ${x} < ${hi32})` : `((${x} >= ${lo32} OR ${x} < ${hi32}) AND ${x} > 2)`;
}

/** Releases, release groups and events to read again. */
export interface Affected {
  releases: Set<number>;
  groups: Set<number>;
  events: Set<number>;
}

export function emptyAffected(): Affected {
  return { releases: new Set(), groups: new Set(), events: new Set() };
}

type Target = keyof Affected;

/** For each table: what its inserted or updated rows say to read again. */
const CHANGED_ROWS: Partial<Record<LiveTable, { sql: (cond: (alias: string) => string) => string; target: Target }>> = {
  'musicbrainz.release': { sql: (c) => `SELECT r.id AS k FROM musicbrainz.release r WHERE ${c('r')}`, target: 'releases' },
  'musicbrainz.release_group': { sql: (c) => `SELECT g.id AS k FROM musicbrainz.release_group g WHERE ${c('g')}`, target: 'groups' },
  'musicbrainz.release_country': { sql: (c) => `SELECT DISTINCT e.release AS k FROM musicbrainz.release_country e WHERE ${c('e')}`, target: 'releases' },
  'musicbrainz.release_unknown_country': { sql: (c) => `SELECT DISTINCT e.release AS k FROM musicbrainz.release_unknown_country e WHERE ${c('e')}`, target: 'releases' },
  'musicbrainz.release_gid_redirect': { sql: (c) => `SELECT DISTINCT x.new_id AS k FROM musicbrainz.release_gid_redirect x WHERE ${c('x')}`, target: 'releases' },
  'musicbrainz.release_group_gid_redirect': { sql: (c) => `SELECT DISTINCT x.new_id AS k FROM musicbrainz.release_group_gid_redirect x WHERE ${c('x')}`, target: 'groups' },
  'cover_art_archive.cover_art': { sql: (c) => `SELECT DISTINCT a.release AS k FROM cover_art_archive.cover_art a WHERE ${c('a')}`, target: 'releases' },
  'cover_art_archive.cover_art_type': {
    sql: (c) => `SELECT DISTINCT a.release AS k FROM cover_art_archive.cover_art_type t JOIN cover_art_archive.cover_art a ON a.id = t.id WHERE ${c('t')}`,
    target: 'releases',
  },
  'cover_art_archive.release_group_cover_art': {
    sql: (c) => `SELECT DISTINCT x.release_group AS k FROM cover_art_archive.release_group_cover_art x WHERE ${c('x')}`,
    target: 'groups',
  },
  'musicbrainz.event': { sql: (c) => `SELECT e.id AS k FROM musicbrainz.event e WHERE ${c('e')}`, target: 'events' },
  'musicbrainz.event_gid_redirect': { sql: (c) => `SELECT DISTINCT x.new_id AS k FROM musicbrainz.event_gid_redirect x WHERE ${c('x')}`, target: 'events' },
  'event_art_archive.event_art': { sql: (c) => `SELECT DISTINCT a.event AS k FROM event_art_archive.event_art a WHERE ${c('a')}`, target: 'events' },
  'event_art_archive.event_art_type': {
    sql: (c) => `SELECT DISTINCT a.event AS k FROM event_art_archive.event_art_type t JOIN event_art_archive.event_art a ON a.id = t.id WHERE ${c('t')}`,
    target: 'events',
  },
};

/**
 * The releases or groups that rows of `table` written since `from` name; undefined when
 * `from` is too far back to compare (then the caller reads everything again).
 */
export async function changedRows(q: LiveQuery, table: LiveTable, from: string, snap: SnapshotMark, into: Affected): Promise<boolean> {
  const spec = CHANGED_ROWS[table];
  if (spec === undefined) return true;
  if (xminSince('x', from, snap) === undefined) return false;
  const rows = await q<{ k: number }>(spec.sql((alias) => xminSince(alias, from, snap) as string));
  for (const r of rows) into[spec.target].add(Number(r.k));
  return true;
}

/** How deleted rows of a table are found: its keys on both sides, by ranges of an integer column. */
interface DeleteSpec {
  /** Integer column of the mirror's table the ranges are of, and the same of sleeve's rows. */
  mirrorTable: string;
  mirrorRange: string;
  mirrorKey: string;
  /** sleeve's rows that came from the table: FROM … WHERE …, and their range column, key and target. */
  sleeveFrom: string;
  sleeveRange: string;
  sleeveKey: string;
  sleeveTarget: string;
  target: Target;
}

const DELETES: Partial<Record<LiveTable, DeleteSpec>> = {
  'musicbrainz.release': {
    mirrorTable: 'musicbrainz.release',
    mirrorRange: 'id',
    mirrorKey: 'id::text',
    sleeveFrom: 'release WHERE imported = 1',
    sleeveRange: 'id',
    sleeveKey: "id || ''",
    sleeveTarget: 'id',
    target: 'releases',
  },
  'musicbrainz.release_group': {
    mirrorTable: 'musicbrainz.release_group',
    mirrorRange: 'id',
    mirrorKey: 'id::text',
    sleeveFrom: 'release_group WHERE imported = 1',
    sleeveRange: 'id',
    sleeveKey: "id || ''",
    sleeveTarget: 'id',
    target: 'groups',
  },
  'cover_art_archive.cover_art': {
    mirrorTable: 'cover_art_archive.cover_art',
    mirrorRange: 'id',
    mirrorKey: 'id::text',
    sleeveFrom: 'cover_art WHERE imported = 1',
    sleeveRange: 'id',
    sleeveKey: "id || ''",
    sleeveTarget: 'release',
    target: 'releases',
  },
  'cover_art_archive.cover_art_type': {
    mirrorTable: 'cover_art_archive.cover_art_type',
    mirrorRange: 'id',
    mirrorKey: "id::text || ':' || type_id::text",
    sleeveFrom: 'cover_art_type t JOIN cover_art c ON c.id = t.id WHERE c.imported = 1',
    sleeveRange: 't.id',
    sleeveKey: "t.id || ':' || t.type_id",
    sleeveTarget: 'c.release',
    target: 'releases',
  },
  'cover_art_archive.release_group_cover_art': {
    mirrorTable: 'cover_art_archive.release_group_cover_art',
    mirrorRange: 'release_group',
    mirrorKey: 'release_group::text',
    sleeveFrom: 'release_group_cover_art x JOIN release_group g ON g.id = x.release_group WHERE g.imported = 1',
    sleeveRange: 'x.release_group',
    sleeveKey: "x.release_group || ''",
    sleeveTarget: 'x.release_group',
    target: 'groups',
  },
  'musicbrainz.release_gid_redirect': {
    mirrorTable: 'musicbrainz.release_gid_redirect',
    mirrorRange: 'new_id',
    mirrorKey: 'gid::text',
    sleeveFrom: 'release_gid_redirect WHERE imported = 1',
    sleeveRange: 'new_id',
    sleeveKey: 'gid',
    sleeveTarget: 'new_id',
    target: 'releases',
  },
  'musicbrainz.release_group_gid_redirect': {
    mirrorTable: 'musicbrainz.release_group_gid_redirect',
    mirrorRange: 'new_id',
    mirrorKey: 'gid::text',
    sleeveFrom: 'release_group_gid_redirect WHERE imported = 1',
    sleeveRange: 'new_id',
    sleeveKey: 'gid',
    sleeveTarget: 'new_id',
    target: 'groups',
  },
  'musicbrainz.event': {
    mirrorTable: 'musicbrainz.event',
    mirrorRange: 'id',
    mirrorKey: 'id::text',
    sleeveFrom: 'event WHERE imported = 1',
    sleeveRange: 'id',
    sleeveKey: "id || ''",
    sleeveTarget: 'id',
    target: 'events',
  },
  'musicbrainz.event_gid_redirect': {
    mirrorTable: 'musicbrainz.event_gid_redirect',
    mirrorRange: 'new_id',
    mirrorKey: 'gid::text',
    sleeveFrom: 'event_gid_redirect WHERE imported = 1',
    sleeveRange: 'new_id',
    sleeveKey: 'gid',
    sleeveTarget: 'new_id',
    target: 'events',
  },
  'event_art_archive.event_art': {
    mirrorTable: 'event_art_archive.event_art',
    mirrorRange: 'id',
    mirrorKey: 'id::text',
    sleeveFrom: 'event_art WHERE imported = 1',
    sleeveRange: 'id',
    sleeveKey: "id || ''",
    sleeveTarget: 'event',
    target: 'events',
  },
  'event_art_archive.event_art_type': {
    mirrorTable: 'event_art_archive.event_art_type',
    mirrorRange: 'id',
    mirrorKey: "id::text || ':' || type_id::text",
    sleeveFrom: 'event_art_type t JOIN event_art c ON c.id = t.id WHERE c.imported = 1',
    sleeveRange: 't.id',
    sleeveKey: "t.id || ':' || t.type_id",
    sleeveTarget: 'c.event',
    target: 'events',
  },
};

/** Rows per range compared: a range whose counts differ is compared key by key. */
const ROWS_PER_RANGE = 1000;

/** Whether deletions from `table` are looked for (the others are found another way, or not needed). */
export function findsDeletes(table: LiveTable): boolean {
  return DELETES[table] !== undefined;
}

/**
 * The releases or groups rows deleted from `table` belonged to (sleeve's copy says which):
 * keys counted per range on both sides; ranges that differ compared key by key.
 */
export async function deletedRows(q: LiveQuery, db: Db, table: LiveTable, into: Affected): Promise<void> {
  const spec = DELETES[table];
  if (spec === undefined) return;
  const [size] = await q<{ n: number; top: number | null }>(`SELECT count(*)::bigint AS n, max(${spec.mirrorRange})::bigint AS top FROM ${spec.mirrorTable}`);
  const sleeveTop = await sql<{ top: number | null }>`SELECT max(${sql.raw(spec.sleeveRange)}) AS top FROM ${sql.raw(spec.sleeveFrom)}`.execute(db);
  const top = Math.max(Number(size?.top ?? 0), Number(sleeveTop.rows[0]?.top ?? 0));
  if (top <= 0) return;
  const ranges = Math.max(1, Math.ceil(Number(size?.n ?? 0) / ROWS_PER_RANGE));
  const width = Math.max(1, Math.ceil((top + 1) / ranges));
  const mirrorCounts = new Map<number, number>();
  for (const r of await q<{ b: number; n: number }>(`SELECT (${spec.mirrorRange} / ${width})::bigint AS b, count(*)::bigint AS n FROM ${spec.mirrorTable} GROUP BY 1`)) {
    mirrorCounts.set(Number(r.b), Number(r.n));
  }
  const sleeveCounts = await sql<{ b: number; n: number }>`SELECT ${sql.raw(spec.sleeveRange)} / ${sql.raw(String(width))} AS b, count(*) AS n FROM ${sql.raw(spec.sleeveFrom)} GROUP BY 1`.execute(db);
  for (const r of sleeveCounts.rows) {
    const b = Number(r.b);
    // More in sleeve than in the mirror (sleeve leaves out rows it cannot take, never adds): something left the mirror.
    if (Number(r.n) <= (mirrorCounts.get(b) ?? 0)) continue;
    const lo = b * width;
    const hi = lo + width;
    const mirrorKeys = new Set(
      (await q<{ k: string }>(`SELECT ${spec.mirrorKey} AS k FROM ${spec.mirrorTable} WHERE ${spec.mirrorRange} >= $1 AND ${spec.mirrorRange} < $2`, [lo, hi])).map((x) => x.k),
    );
    const mine = await sql<{ k: string; t: number }>`SELECT ${sql.raw(spec.sleeveKey)} AS k, ${sql.raw(spec.sleeveTarget)} AS t FROM ${sql.raw(spec.sleeveFrom)} AND ${sql.raw(spec.sleeveRange)} >= ${lo} AND ${sql.raw(spec.sleeveRange)} < ${hi}`.execute(db);
    for (const m of mine.rows) if (!mirrorKeys.has(String(m.k))) into[spec.target].add(Number(m.t));
  }
}

/** Releases (and, when `eventArt`, events) whose images wait for their add-edit, and whose edit the mirror now has closed. */
export async function approvedSince(q: LiveQuery, db: Db, into: Affected, limit: number, eventArt: boolean): Promise<void> {
  const pending: { edit: number; owner: number; target: Target }[] = (
    await db.selectFrom('cover_art').select(['edit', 'release as owner']).where('imported', '=', 1).where('approved', '=', 0).limit(limit).execute()
  ).map((p) => ({ ...p, target: 'releases' }));
  if (eventArt) {
    const events = await db.selectFrom('event_art').select(['edit', 'event as owner']).where('imported', '=', 1).where('approved', '=', 0).limit(limit).execute();
    for (const p of events) pending.push({ ...p, target: 'events' });
  }
  if (pending.length === 0) return;
  const byEdit = new Map<number, { owner: number; target: Target }[]>();
  for (const p of pending) byEdit.set(p.edit, [...(byEdit.get(p.edit) ?? []), p]);
  const closed = await q<{ id: number }>(`SELECT id FROM musicbrainz.edit WHERE id = ANY($1::int[]) AND close_time IS NOT NULL`, [[...byEdit.keys()]]);
  for (const c of closed) for (const p of byEdit.get(Number(c.id)) ?? []) into[p.target].add(p.owner);
}

/**
 * The releases (and, when `eventArt`, events) with images of these mime types: those skipped
 * while their mime type was not in the mirror's `image_type`, once it is (one pass over each
 * image table, only when `image_type` gained a type).
 */
export async function withImageTypes(q: LiveQuery, mimeTypes: string[], eventArt: boolean, into: Affected): Promise<void> {
  if (mimeTypes.length === 0) return;
  for (const r of await q<{ k: number }>(`SELECT DISTINCT release AS k FROM cover_art_archive.cover_art WHERE mime_type = ANY($1::text[])`, [mimeTypes])) into.releases.add(Number(r.k));
  if (!eventArt) return;
  for (const r of await q<{ k: number }>(`SELECT DISTINCT event AS k FROM event_art_archive.event_art WHERE mime_type = ANY($1::text[])`, [mimeTypes])) into.events.add(Number(r.k));
}

/**
 * The release event tables (a release's dates and countries; not the Event Art Archive's
 * events): sleeve keeps no copy of their rows (only each release's earliest date), so a
 * deleted release event is found against the mirror's own look of the last time, per range
 * of release ids (kept in the follower's state): the range's count and a fingerprint of its
 * keys (the sum of a hash of each row's key), so a row deleted in the same pass as another is
 * added in its range still moves it.
 */
export const RELEASE_EVENT_TABLES = ['musicbrainz.release_country', 'musicbrainz.release_unknown_country'] as const;
export type ReleaseEventTable = (typeof RELEASE_EVENT_TABLES)[number];

/**
 * Each table's key as one hashed integer (release_country's key is (release, country),
 * release_unknown_country's the release). Only the key: a row whose key stays and whose date
 * changes was written, and is found by its xmin.
 */
const EVENT_KEY_HASH: Record<ReleaseEventTable, string> = {
  'musicbrainz.release_country': 'hashint8((release::bigint << 32) | (country::bigint & 4294967295))',
  'musicbrainz.release_unknown_country': 'hashint8(release::bigint)',
};

export interface ReleaseEventRanges {
  width: number;
  /** Range number → events in it. */
  counts: Record<string, number>;
  /** Range number → sum of its rows' key hashes (absent in a state written before they were kept). */
  sums?: Record<string, string>;
}

/** The table's release events counted and fingerprinted per range of release ids (`width` kept from the last look, if any): one pass over the table. */
export async function countReleaseEvents(q: LiveQuery, table: ReleaseEventTable, width?: number): Promise<ReleaseEventRanges> {
  let w = width;
  if (w === undefined) {
    const [size] = await q<{ n: number; top: number | null }>(`SELECT count(*)::bigint AS n, max(release)::bigint AS top FROM ${table}`);
    const ranges = Math.max(1, Math.ceil(Number(size?.n ?? 0) / ROWS_PER_RANGE));
    w = Math.max(1, Math.ceil((Number(size?.top ?? 0) + 1) / ranges));
  }
  const counts: Record<string, number> = {};
  const sums: Record<string, string> = {};
  const rows = await q<{ b: number; n: number; h: string }>(`SELECT (release / ${w})::bigint AS b, count(*)::bigint AS n, sum(${EVENT_KEY_HASH[table]})::text AS h FROM ${table} GROUP BY 1`);
  for (const r of rows) {
    counts[String(r.b)] = Number(r.n);
    sums[String(r.b)] = r.h;
  }
  return { width: w, counts, sums };
}

/** Whether range `b` holds other rows now than at the last look (by its count, and by its fingerprint when the last look kept one). */
function rangeMoved(before: ReleaseEventRanges, now: ReleaseEventRanges, b: string): boolean {
  if (before.counts[b] !== now.counts[b]) return true;
  return before.sums !== undefined && before.sums[b] !== now.sums?.[b];
}

/** The releases sleeve has in every range whose release events moved since `before`; answers the look now. */
export async function movedReleaseEvents(q: LiveQuery, db: Db, table: ReleaseEventTable, before: ReleaseEventRanges | undefined, into: Affected): Promise<ReleaseEventRanges> {
  const now = await countReleaseEvents(q, table, before?.width);
  if (before === undefined) return now;
  const ranges = new Set([...Object.keys(before.counts), ...Object.keys(now.counts)]);
  for (const b of ranges) {
    if (!rangeMoved(before, now, b)) continue;
    const lo = Number(b) * now.width;
    for (const r of await db.selectFrom('release').select('id').where('id', '>=', lo).where('id', '<', lo + now.width).where('imported', '=', 1).execute()) into.releases.add(r.id);
  }
  return now;
}
