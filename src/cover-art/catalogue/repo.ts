import { sql, type Transaction } from 'kysely';
import { dialectOf } from '../../db/dialect.js';
import { preparedQuery } from '../../db/prepared.js';
import type { Database, Db } from '../../db/schema.js';

/** A database or a transaction: repository functions take either. */
export type Queryable = Db | Transaction<Database>;

export const FRONT_TYPE = 1;
export const BACK_TYPE = 2;
const RAW_TYPE = 14;

export interface ReleaseRef {
  id: number;
  gid: string;
  release_group: number;
}

export interface ImageRow {
  id: number;
  ordering: number;
  comment: string;
  edit: number;
  approved: number;
  mime_type: string;
  suffix: string;
  /** Bytes of the original, when recorded. */
  filesize?: number | null;
  /** What sleeve measured of the stored files (cover-art/images/measure.ts); null or absent: unknown. */
  width?: number | null;
  height?: number | null;
  stored_size?: number | null;
  thumbnail_dimensions?: string | null;
}

export interface ImageWithTypes extends ImageRow {
  /** Art type ids, ascending. */
  typeIds: number[];
  types: string[];
}

/** The release with this MBID, or the one it was merged into. */
// The lookups every cover art request makes are prepared once (db/prepared.ts).
const releaseByGid = preparedQuery(['gid'] as const, (db, p) => db.selectFrom('release').select(['id', 'gid', 'release_group']).where('gid', '=', p.gid));
const releaseByOldGid = preparedQuery(['gid'] as const, (db, p) =>
  db.selectFrom('release_gid_redirect as x').innerJoin('release as r', 'r.id', 'x.new_id').select(['r.id', 'r.gid', 'r.release_group']).where('x.gid', '=', p.gid),
);

export async function findRelease(db: Queryable, gid: string): Promise<ReleaseRef | undefined> {
  return (await releaseByGid(db, { gid })).rows[0] ?? (await releaseByOldGid(db, { gid })).rows[0];
}

/**
 * The release's revision: every change of its art, applied or waiting for an approver, moves it
 * (catalogue.ts). Read before what a form is checked against, and given back as expectRevision,
 * it makes the check and the change one step, across processes too.
 */
export async function releaseRevision(db: Queryable, releaseId: number): Promise<number> {
  const row = await db.selectFrom('release').select('revision').where('id', '=', releaseId).executeTakeFirst();
  return Number(row?.revision ?? 0);
}

/** The release group with this MBID, or the one it was merged into. */
export async function findReleaseGroup(db: Queryable, gid: string): Promise<{ id: number; gid: string } | undefined> {
  const direct = await db.selectFrom('release_group').select(['id', 'gid']).where('gid', '=', gid).executeTakeFirst();
  if (direct !== undefined) return direct;
  return db
    .selectFrom('release_group_gid_redirect as x')
    .innerJoin('release_group as g', 'g.id', 'x.new_id')
    .select(['g.id', 'g.gid'])
    .where('x.gid', '=', gid)
    .executeTakeFirst();
}

/**
 * Whether only approved images may be a cover (a release's front or back, the front that
 * represents its group): under the `review` policy, so that an editor's pending addition,
 * listed at once with `approved: false`, becomes a cover only once an approver approves it.
 * Under `auto`, as on coverartarchive.org, approval is not considered (docs/decisions.md,
 * "Cover art edits and approval").
 */
export function coversNeedApproval(policy: 'auto' | 'review' | undefined): boolean {
  return policy === 'review';
}

/** The least `approved` a cover may have: 1 when covers need approval, else 0 (any image). */
function leastApproved(approvedOnly: boolean): number {
  return approvedOnly ? 1 : 0;
}

/** The lowest-ordered image of the release carrying this art type (front = 1, back = 2), approved at least `approved`. */
const primaryImage = preparedQuery(['release', 'type', 'approved'] as const, (db, p) =>
  db
    .selectFrom('cover_art as ca')
    .innerJoin('cover_art_type as t', (j) => j.onRef('t.id', '=', 'ca.id').on('t.type_id', '=', p.type))
    .innerJoin('image_type as it', 'it.mime_type', 'ca.mime_type')
    .select(['ca.id', 'it.suffix'])
    .where('ca.release', '=', p.release)
    .where('ca.approved', '>=', p.approved)
    .orderBy('ca.ordering')
    .orderBy('ca.id')
    .limit(1),
);

/** The release's cover of an art type (front = 1, back = 2): its lowest-ordered image of that type, only among approved ones when `approvedOnly`. */
export async function findPrimaryImage(db: Queryable, releaseId: number, typeId: number, approvedOnly: boolean): Promise<{ id: number; suffix: string } | undefined> {
  return (await primaryImage(db, { release: releaseId, type: typeId, approved: leastApproved(approvedOnly) })).rows[0];
}

/**
 * The release with this MBID and its lowest-ordered image of an art type, in one query: on
 * PostgreSQL an uncached front or back lookup then costs one round trip, not two (measured
 * one after another on one connection: ~210 against ~350 µs).
 */
const releaseWithPrimaryImage = preparedQuery(['gid', 'type', 'approved'] as const, (db, p) =>
  db
    .selectFrom('release as r')
    .leftJoin('cover_art as ca', (j) =>
      j.on((eb) =>
        eb(
          'ca.id',
          '=',
          eb
            .selectFrom('cover_art as c2')
            .innerJoin('cover_art_type as t', (jt) => jt.onRef('t.id', '=', 'c2.id').on('t.type_id', '=', p.type))
            .select('c2.id')
            .whereRef('c2.release', '=', 'r.id')
            .where('c2.approved', '>=', p.approved)
            .orderBy('c2.ordering')
            .orderBy('c2.id')
            .limit(1),
        ),
      ),
    )
    .leftJoin('image_type as it', 'it.mime_type', 'ca.mime_type')
    .select(['r.id', 'r.gid', 'r.release_group', 'ca.id as image_id', 'it.suffix'])
    .where('r.gid', '=', p.gid),
);

/** The release with this MBID (or the one it was merged into) and its primary image of `typeId` (findPrimaryImage), if any. */
export async function findReleaseAndPrimaryImage(
  db: Queryable,
  gid: string,
  typeId: number,
  approvedOnly: boolean,
): Promise<{ release: ReleaseRef; image: { id: number; suffix: string } | undefined } | undefined> {
  if (!dialectOf(db).queriesAreRoundTrips) {
    // A database in this process (SQLite): there the two plain lookups are quicker than the
    // joined one (measured: ~30 against ~41 µs on 100,000 releases).
    const release = await findRelease(db, gid);
    return release === undefined ? undefined : { release, image: await findPrimaryImage(db, release.id, typeId, approvedOnly) };
  }
  const row = (await releaseWithPrimaryImage(db, { gid, type: typeId, approved: leastApproved(approvedOnly) })).rows[0];
  if (row !== undefined) {
    const release = { id: row.id, gid: row.gid, release_group: row.release_group };
    return { release, image: row.image_id === null || row.suffix === null ? undefined : { id: Number(row.image_id), suffix: row.suffix } };
  }
  const merged = (await releaseByOldGid(db, { gid })).rows[0];
  return merged === undefined ? undefined : { release: merged, image: await findPrimaryImage(db, merged.id, typeId, approvedOnly) };
}

const imageOfRelease = preparedQuery(['id', 'release'] as const, (db, p) =>
  db
    .selectFrom('cover_art as ca')
    .innerJoin('image_type as it', 'it.mime_type', 'ca.mime_type')
    .select(['ca.id', 'it.suffix'])
    .where('ca.id', '=', p.id)
    .where('ca.release', '=', p.release),
);

export async function findImage(db: Queryable, releaseId: number, imageId: number): Promise<{ id: number; suffix: string } | undefined> {
  return (await imageOfRelease(db, { id: imageId, release: releaseId })).rows[0];
}

/** The release's images in listing order, with their types. */
export async function listImages(db: Queryable, releaseId: number): Promise<ImageWithTypes[]> {
  const rows = await db
    .selectFrom('cover_art as ca')
    .innerJoin('image_type as it', 'it.mime_type', 'ca.mime_type')
    .select(['ca.id', 'ca.ordering', 'ca.comment', 'ca.edit', 'ca.approved', 'ca.mime_type', 'it.suffix', 'ca.filesize', 'ca.width', 'ca.height', 'ca.stored_size', 'ca.thumbnail_dimensions'])
    .where('ca.release', '=', releaseId)
    .orderBy('ca.ordering')
    .orderBy('ca.id')
    .execute();
  if (rows.length === 0) return [];
  const types = await db
    .selectFrom('cover_art_type as t')
    .innerJoin('cover_art as ca', 'ca.id', 't.id')
    .innerJoin('art_type as a', 'a.id', 't.type_id')
    .select(['t.id', 't.type_id', 'a.name'])
    .where('ca.release', '=', releaseId)
    .orderBy('t.type_id')
    .execute();
  return withTypes(rows, types);
}

/** Images (in their order) with their types (each image's in type id order): a release's or an event's. */
export function withTypes<Row extends { id: number }>(rows: Row[], types: { id: number; type_id: number; name: string }[]): (Row & { typeIds: number[]; types: string[] })[] {
  const byImage = new Map(rows.map((r) => [r.id, { ...r, typeIds: [] as number[], types: [] as string[] }]));
  for (const t of types) {
    const image = byImage.get(t.id);
    image?.typeIds.push(t.type_id);
    image?.types.push(t.name);
  }
  return [...byImage.values()];
}

export async function hasImages(db: Queryable, releaseId: number): Promise<boolean> {
  const row = await db.selectFrom('cover_art').select('id').where('release', '=', releaseId).limit(1).executeTakeFirst();
  return row !== undefined;
}

interface Candidate {
  id: number;
  gid: string;
  date_year: number | null;
  date_month: number | null;
  date_day: number | null;
  front_id: number | null;
}

/**
 * The release whose art represents the group, in coverartarchive.org's order: among
 * releases with a front image, the editor-chosen one first, then fronts not typed
 * Raw/Unedited, then the earliest date (NULLs last); then, where coverartarchive.org
 * leaves ties open, the lowest internal id so ties are stable. A release's front is its
 * cover as findPrimaryImage chooses it: only approved images count when `approvedOnly`.
 */
export async function chooseGroupRelease(db: Queryable, groupId: number, approvedOnly: boolean): Promise<GroupChoice | undefined> {
  const candidates: Candidate[] = await db
    .selectFrom('release as r')
    .select((eb) => [
      'r.id',
      'r.gid',
      'r.date_year',
      'r.date_month',
      'r.date_day',
      eb
        .selectFrom('cover_art as ca')
        .innerJoin('cover_art_type as t', (j) => j.onRef('t.id', '=', 'ca.id').on('t.type_id', '=', FRONT_TYPE))
        .select('ca.id')
        .whereRef('ca.release', '=', 'r.id')
        .where('ca.approved', '>=', leastApproved(approvedOnly))
        .orderBy('ca.ordering')
        .orderBy('ca.id')
        .limit(1)
        .as('front_id'),
    ])
    .where('r.release_group', '=', groupId)
    .execute();
  const withFront = candidates.filter((c) => c.front_id !== null);
  if (withFront.length === 0) return undefined;
  if (withFront.length === 1) return { ...pick(withFront[0] as Candidate), reason: 'only' };

  const chosen = await db
    .selectFrom('release_group_cover_art')
    .select('release')
    .where('release_group', '=', groupId)
    .executeTakeFirst();
  const raw = new Set(
    (
      await db
        .selectFrom('cover_art_type')
        .select('id')
        .where('type_id', '=', RAW_TYPE)
        .where(
          'id',
          'in',
          withFront.map((c) => c.front_id as number),
        )
        .execute()
    ).map((r) => r.id),
  );
  const rank = (c: Candidate): number[] => [
    c.id === chosen?.release ? 0 : 1,
    raw.has(c.front_id as number) ? 1 : 0,
    ...[c.date_year, c.date_month, c.date_day].flatMap((v) => (v === null ? [1, 0] : [0, v])),
    c.id,
  ];
  withFront.sort((a, b) => compareRanks(rank(a), rank(b)));
  const [first, second] = withFront as [Candidate, Candidate];
  // Why the first won: the first rank where it beats the runner-up.
  const [a, b] = [rank(first), rank(second)];
  const at = a.findIndex((v, i) => v !== b[i]);
  const reason: GroupChoiceReason = at === 0 ? 'chosen' : at === 1 ? 'not-raw' : at < a.length - 1 ? 'earliest' : 'tie';
  return { ...pick(first), reason };
}

function pick(c: Candidate): { id: number; gid: string } {
  return { id: c.id, gid: c.gid };
}

/**
 * Why a release represents its group: the only one with a front image, the editor's choice
 * (set-cover), the only front not typed Raw/Unedited among the earliest ranks, the earliest
 * date, or (all else equal) the release added first.
 */
export type GroupChoiceReason = 'only' | 'chosen' | 'not-raw' | 'earliest' | 'tie';

export interface GroupChoice {
  id: number;
  gid: string;
  reason: GroupChoiceReason;
}

/** A release with its title, date and group, for pages. */
export interface ReleaseDetails {
  id: number;
  gid: string;
  name: string;
  date: string | undefined;
  groupGid: string;
  groupName: string;
}

function dateText(y: number | null, m: number | null, d: number | null): string | undefined {
  if (y === null) return undefined;
  const two = (n: number) => String(n).padStart(2, '0');
  return `${String(y).padStart(4, '0')}${m === null ? '' : `-${two(m)}`}${m === null || d === null ? '' : `-${two(d)}`}`;
}

export async function releaseDetails(db: Queryable, releaseId: number): Promise<ReleaseDetails | undefined> {
  const r = await db
    .selectFrom('release as r')
    .innerJoin('release_group as g', 'g.id', 'r.release_group')
    .select(['r.id', 'r.gid', 'r.name', 'r.date_year', 'r.date_month', 'r.date_day', 'g.gid as group_gid', 'g.name as group_name'])
    .where('r.id', '=', releaseId)
    .executeTakeFirst();
  if (r === undefined) return undefined;
  return { id: r.id, gid: r.gid, name: r.name, date: dateText(r.date_year, r.date_month, r.date_day), groupGid: r.group_gid, groupName: r.group_name };
}

/** A release of a group, with its front image (its cover as findPrimaryImage chooses it), if any. */
export interface GroupRelease {
  id: number;
  gid: string;
  name: string;
  date: string | undefined;
  front: { id: number; suffix: string } | undefined;
}

/** The group's releases (by date, NULLs last, then id), each with its front image (approved only when `approvedOnly`), and the editor-chosen one. */
export async function groupReleases(db: Queryable, groupId: number, approvedOnly: boolean): Promise<{ releases: GroupRelease[]; chosen: string | undefined; name: string }> {
  const group = await db.selectFrom('release_group').select('name').where('id', '=', groupId).executeTakeFirst();
  const rows = await db.selectFrom('release').select(['id', 'gid', 'name', 'date_year', 'date_month', 'date_day']).where('release_group', '=', groupId).orderBy('id').limit(500).execute();
  const releases: GroupRelease[] = [];
  for (const r of rows) {
    releases.push({ id: r.id, gid: r.gid, name: r.name, date: dateText(r.date_year, r.date_month, r.date_day), front: await findPrimaryImage(db, r.id, FRONT_TYPE, approvedOnly) });
  }
  releases.sort((a, b) => (a.date ?? '\uffff').localeCompare(b.date ?? '\uffff') || a.id - b.id);
  const chosen = await db
    .selectFrom('release_group_cover_art as c')
    .innerJoin('release as r', 'r.id', 'c.release')
    .select('r.gid')
    .where('c.release_group', '=', groupId)
    .executeTakeFirst();
  return { releases, chosen: chosen?.gid, name: group?.name ?? '' };
}

/** An image recently added, with its release. */
export interface RecentImage {
  id: number;
  suffix: string;
  /** What it is art of: a release (the Cover Art Archive) or an event (the Event Art Archive). */
  entity: 'release' | 'event';
  /** The release's or event's MBID and name. */
  owner: string;
  ownerName: string;
  comment: string;
  /** False while the addition waits for an approver. */
  approved: boolean;
  dateUploaded: number;
}

/**
 * The most recently added images of both archives, newest first. Each archive's newest are
 * found by id (ids grow with time within an archive, by its primary key: no scan), then the
 * two are merged by when they were added (the archives' ids are not one sequence upstream).
 */
export async function recentImages(db: Queryable, limit: number): Promise<RecentImage[]> {
  const releases = await db
    .selectFrom('cover_art as ca')
    .innerJoin('release as r', 'r.id', 'ca.release')
    .innerJoin('image_type as it', 'it.mime_type', 'ca.mime_type')
    .select(['ca.id', 'it.suffix', 'r.gid', 'r.name', 'ca.comment', 'ca.approved', 'ca.date_uploaded'])
    .orderBy('ca.id', 'desc')
    .limit(limit)
    .execute();
  const events = await db
    .selectFrom('event_art as ea')
    .innerJoin('event as e', 'e.id', 'ea.event')
    .innerJoin('image_type as it', 'it.mime_type', 'ea.mime_type')
    .select(['ea.id', 'it.suffix', 'e.gid', 'e.name', 'ea.comment', 'ea.approved', 'ea.date_uploaded'])
    .orderBy('ea.id', 'desc')
    .limit(limit)
    .execute();
  const rows = [...releases.map((r) => ({ ...r, entity: 'release' as const })), ...events.map((r) => ({ ...r, entity: 'event' as const }))];
  rows.sort((a, b) => Number(b.date_uploaded) - Number(a.date_uploaded) || Number(b.id) - Number(a.id));
  return rows.slice(0, limit).map((r) => ({
    id: Number(r.id),
    suffix: r.suffix,
    entity: r.entity,
    owner: r.gid,
    ownerName: r.name,
    comment: r.comment,
    approved: r.approved === 1,
    dateUploaded: Number(r.date_uploaded),
  }));
}

function compareRanks(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) {
    const d = (a[i] as number) - (b[i] as number);
    if (d !== 0) return d;
  }
  return 0;
}

/** Current value of a counter row (catalogue_version, cover_art_id). */
export async function readCounter(db: Queryable, name: string): Promise<number> {
  const row = await db.selectFrom('counter').select('value').where('name', '=', name).executeTakeFirstOrThrow();
  return Number(row.value);
}

/** Marks a change of the catalogue, for the caches of serving processes. Call inside the change's transaction. */
export async function bumpCatalogueVersion(db: Queryable): Promise<void> {
  await db
    .updateTable('counter')
    .set((eb) => ({ value: eb('value', '+', 1) }))
    .where('name', '=', 'catalogue_version')
    .execute();
}

/** Counter rows kept by the catalogue's changes for the metrics of serving processes (migration 20261122T0200). */
export type CatalogueCounter = 'uploads_total' | 'upload_bytes_total' | 'image_removals_total' | 'releases' | 'images';

/**
 * Adds to catalogue counters. Call inside the change's transaction, after
 * bumpCatalogueVersion: every change takes that row first, so these rows are always
 * taken after it (no new lock order) and the counts commit or roll back with the change.
 */
export async function addToCounters(db: Queryable, deltas: Partial<Record<CatalogueCounter, number>>): Promise<void> {
  for (const [name, delta] of Object.entries(deltas)) {
    if (delta === 0) continue;
    await db
      .updateTable('counter')
      .set((eb) => ({ value: eb('value', '+', delta) }))
      .where('name', '=', name)
      .execute();
  }
}

/**
 * Sets the `releases` and `images` counters to the true counts (scans both tables), for
 * writers that bypass the catalogue functions, such as bulk imports; `art reindex` runs it.
 * The counter rows are locked before counting, so a change committing meanwhile waits and
 * then adds its own +1 to the recount instead of being lost in it.
 */
export async function recountCatalogue(db: Db): Promise<{ releases: number; images: number }> {
  return db.transaction().execute(async (trx) => {
    await trx
      .updateTable('counter')
      .set((eb) => ({ value: eb.ref('value') }))
      .where('name', 'in', ['releases', 'images'])
      .execute();
    const releases = Number((await trx.selectFrom('release').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
    const images = Number((await trx.selectFrom('cover_art').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
    await trx.updateTable('counter').set({ value: releases }).where('name', '=', 'releases').execute();
    await trx.updateTable('counter').set({ value: images }).where('name', '=', 'images').execute();
    return { releases, images };
  });
}

/**
 * Allocates the next image id: the interface's time formula, or one more than the
 * last id when that is not larger. One atomic statement, so concurrent processes
 * never get the same id, and ids never go back even if the clock does.
 */
export async function allocateImageId(db: Queryable, candidate: number): Promise<number> {
  const greatest = dialectOf(db).greatest(sql`value + 1`, sql`${candidate}`);
  const row = await sql<{ value: number }>`UPDATE counter SET value = ${greatest} WHERE name = 'cover_art_id' RETURNING value`.execute(db);
  const value = row.rows[0]?.value;
  if (value === undefined) throw new Error('counter cover_art_id is missing; run sleeve migrate');
  return Number(value);
}

/** Art type names by id and ids by lower-case name. */
export async function loadArtTypes(db: Queryable): Promise<{ id: number; name: string }[]> {
  return db.selectFrom('art_type').select(['id', 'name']).orderBy('id').execute();
}
