/*
 * Reads releases, release groups and events from the mirror's MusicBrainz schema, in one
 * snapshot, into the rows `sleeve import musicbrainz` would have made of the same tables
 * (import/apply-dump.ts and apply-events.ts are the specification: the release date is the
 * earliest event of either release event table, year, month, day ascending with NULLs last;
 * `approved` is "the add-edit is closed", or "no edit pending" when the mirror holds no edits;
 * rows pointing at what is left out are left out).
 */
import type { LiveQuery } from './source.js';

export interface LiveRelease {
  id: number;
  gid: string;
  name: string;
  release_group: number;
  date_year: number | null;
  date_month: number | null;
  date_day: number | null;
}

export interface LiveGroup {
  id: number;
  gid: string;
  name: string;
}

/** An event: its id, MBID and name (sleeve keeps no more of it). */
type LiveEvent = LiveGroup;

export interface LiveImage {
  id: number;
  /** The release (or event) it belongs to. */
  owner: number;
  comment: string;
  edit: number;
  ordering: number;
  date_uploaded: number;
  approved: number;
  mime_type: string;
  filesize: number | null;
  thumb_250_filesize: number | null;
  thumb_500_filesize: number | null;
  thumb_1200_filesize: number | null;
  /** Art type ids, ascending. */
  types: number[];
}

export interface LiveRedirect {
  gid: string;
  new_id: number;
}

export interface LiveArtType {
  id: number;
  name: string;
  parent: number | null;
  child_order: number;
  description: string;
  gid: string;
}

/** What the mirror holds for the releases and groups asked for, in one snapshot. */
export interface LiveBatch {
  /** Every release asked for (or pulled in as a group's chosen cover); absent from `releases`: not in the mirror. */
  askedReleases: Set<number>;
  askedGroups: Set<number>;
  releases: Map<number, LiveRelease>;
  groups: Map<number, LiveGroup>;
  /** By release id, in listing order (ordering, id). */
  images: Map<number, LiveImage[]>;
  releaseRedirects: Map<number, LiveRedirect[]>;
  groupRedirects: Map<number, LiveRedirect[]>;
  /** Group id → the release chosen for its cover. */
  groupCovers: Map<number, number>;
}

/** Called for each row sleeve does not take (logged once per row by the caller). */
export type SkipRow = (what: string, key: string) => void;

/** The mirror's types: art types (of both archives), and image types (mime type → suffix). */
export interface LiveTypes {
  artTypes: LiveArtType[];
  /** event_art_archive.art_type; undefined when the Event Art Archive is not followed. */
  eventKinds: LiveArtType[] | undefined;
  imageTypes: Map<string, string>;
  /** Whether the mirror holds edits (then `approved` comes from them). */
  withEdits: boolean;
}

/**
 * Where an archive's images are in the MusicBrainz schema: the Cover Art Archive's, of
 * releases, and the Event Art Archive's (`event_art_archive.event_art`, of events), of the
 * same shape.
 */
export interface ArtArchive {
  schema: 'cover_art_archive' | 'event_art_archive';
  /** The image table and its column naming the entity. */
  images: 'cover_art' | 'event_art';
  entity: 'release' | 'event';
  /** The image types' table. */
  types: 'cover_art_type' | 'event_art_type';
}

const COVER_ART: ArtArchive = { schema: 'cover_art_archive', images: 'cover_art', entity: 'release', types: 'cover_art_type' };
const EVENT_ART: ArtArchive = { schema: 'event_art_archive', images: 'event_art', entity: 'event', types: 'event_art_type' };

/** A suffix or mime type fit for a file name and a header (import/copy-text.ts has the same checks). */
const SUFFIX_RE = /^[a-z0-9]{1,10}$/;
const MIME_RE = /^[a-z0-9!#$&^_.+-]{1,64}\/[a-z0-9!#$&^_.+-]{1,64}$/;

/** An archive's art types, those without a name or with another's name left out. */
async function readArtTypes(q: LiveQuery, schema: ArtArchive['schema'], skip: SkipRow): Promise<LiveArtType[]> {
  const artTypes: LiveArtType[] = [];
  const names = new Set<string>();
  const rows = await q<LiveArtType>(`SELECT id, name, parent, child_order, coalesce(description, '') AS description, gid::text AS gid FROM ${schema}.art_type ORDER BY id`);
  for (const r of rows) {
    if (r.name === null || r.child_order === null || names.has(r.name)) skip(`${schema}.art_type: no name, or a name used by another art type`, String(r.id));
    else {
      names.add(r.name);
      artTypes.push(r);
    }
  }
  return artTypes;
}

/** The mirror's image types sleeve can use (mime type → suffix); the others skipped. */
export async function readImageTypes(q: LiveQuery, skip: SkipRow): Promise<Map<string, string>> {
  const imageTypes = new Map<string, string>();
  for (const r of await q<{ mime_type: string | null; suffix: string | null }>(`SELECT mime_type, suffix FROM cover_art_archive.image_type`)) {
    if (r.mime_type === null || r.suffix === null || !MIME_RE.test(r.mime_type) || !SUFFIX_RE.test(r.suffix)) skip('image_type: mime type or suffix not usable', String(r.mime_type));
    else imageTypes.set(r.mime_type, r.suffix);
  }
  return imageTypes;
}

/** The mirror's types; the Event Art Archive's art types too when `eventArt` (it is followed). */
export async function readTypes(q: LiveQuery, skip: SkipRow, eventArt: boolean): Promise<LiveTypes> {
  const artTypes = await readArtTypes(q, 'cover_art_archive', skip);
  const eventKinds = eventArt ? await readArtTypes(q, 'event_art_archive', skip) : undefined;
  const imageTypes = await readImageTypes(q, skip);
  const edits = await q<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM musicbrainz.edit) AS any`);
  return { artTypes, eventKinds, imageTypes, withEdits: edits[0]?.any === true };
}

const EVENTS = `SELECT release, date_year, date_month, date_day FROM musicbrainz.release_country WHERE release = ANY($1::int[])
  UNION ALL SELECT release, date_year, date_month, date_day FROM musicbrainz.release_unknown_country WHERE release = ANY($1::int[])`;

async function readReleaseRows(q: LiveQuery, ids: number[], into: LiveBatch): Promise<void> {
  if (ids.length === 0) return;
  const rows = await q<LiveRelease>(
    `SELECT r.id, r.gid::text AS gid, r.name, r.release_group, e.date_year, e.date_month, e.date_day
       FROM musicbrainz.release r
       LEFT JOIN (SELECT release, date_year, date_month, date_day FROM (
                    SELECT release, date_year, date_month, date_day,
                           row_number() OVER (PARTITION BY release ORDER BY date_year ASC NULLS LAST, date_month ASC NULLS LAST, date_day ASC NULLS LAST) AS rn
                      FROM (${EVENTS}) ev) ranked WHERE rn = 1) e ON e.release = r.id
      WHERE r.id = ANY($1::int[])`,
    [ids],
  );
  for (const r of rows) into.releases.set(r.id, r);
}

async function readGroupRows(q: LiveQuery, ids: number[], into: LiveBatch): Promise<void> {
  const wanted = ids.filter((id) => !into.groups.has(id));
  if (wanted.length === 0) return;
  for (const g of await q<LiveGroup>(`SELECT id, gid::text AS gid, name FROM musicbrainz.release_group WHERE id = ANY($1::int[])`, [wanted])) into.groups.set(g.id, g);
}

interface ImageRowIn extends Omit<LiveImage, 'approved' | 'types'> {
  edits_pending: number | null;
  closed: boolean;
}

/** The images of the releases (or events) `ids`, by owner in listing order (ordering, id), with their types. */
async function readImages(q: LiveQuery, art: ArtArchive, ids: number[], types: LiveTypes, skip: SkipRow): Promise<Map<number, LiveImage[]>> {
  const out = new Map<number, LiveImage[]>();
  if (ids.length === 0) return out;
  const images = `${art.schema}.${art.images}`;
  const rows = await q<ImageRowIn>(
    `SELECT c.id, c.${art.entity} AS owner, c.comment, c.edit, c.ordering, floor(extract(epoch FROM c.date_uploaded) * 1000)::bigint AS date_uploaded,
            c.edits_pending, c.mime_type, c.filesize, c.thumb_250_filesize, c.thumb_500_filesize, c.thumb_1200_filesize,
            (e.close_time IS NOT NULL) AS closed
       FROM ${images} c LEFT JOIN musicbrainz.edit e ON e.id = c.edit
      WHERE c.${art.entity} = ANY($1::int[]) ORDER BY c.${art.entity}, c.ordering, c.id`,
    [ids],
  );
  const typeRows = await q<{ id: number; type_id: number | null }>(
    `SELECT t.id, t.type_id FROM ${art.schema}.${art.types} t JOIN ${images} c ON c.id = t.id WHERE c.${art.entity} = ANY($1::int[]) ORDER BY t.id, t.type_id`,
    [ids],
  );
  const known = new Set((art === EVENT_ART ? (types.eventKinds ?? []) : types.artTypes).map((t) => t.id));
  const typesOf = new Map<number, number[]>();
  for (const t of typeRows) {
    if (t.type_id === null || !known.has(t.type_id)) {
      skip(`${art.types}: unknown art type`, `${t.id} type ${String(t.type_id)}`);
      continue;
    }
    const list = typesOf.get(t.id) ?? [];
    if (!list.includes(t.type_id)) list.push(t.type_id);
    typesOf.set(t.id, list);
  }
  for (const r of rows) {
    const why = badImage(r, types);
    if (why !== undefined) {
      skip(`${art.images}: ${why}`, String(r.id));
      continue;
    }
    const approved = types.withEdits ? (r.closed ? 1 : 0) : r.edits_pending === 0 ? 1 : 0;
    const { edits_pending: _p, closed: _c, ...rest } = r;
    const list = out.get(r.owner) ?? [];
    list.push({ ...rest, approved, types: typesOf.get(r.id) ?? [] });
    out.set(r.owner, list);
  }
  return out;
}

/** Why sleeve cannot take this image row, or undefined. */
function badImage(r: ImageRowIn, types: LiveTypes): string | undefined {
  if (!Number.isSafeInteger(r.id) || r.id <= 0) return 'id not usable';
  if (r.mime_type === null || !types.imageTypes.has(r.mime_type)) return 'unknown mime type';
  if (r.ordering === null || r.ordering <= 0) return 'no ordering';
  if (r.comment === null) return 'NULL comment';
  if (r.edit === null) return 'NULL edit';
  if (r.date_uploaded === null) return 'NULL date_uploaded';
  return undefined;
}

async function readRedirects(q: LiveQuery, table: 'release' | 'release_group' | 'event', ids: number[], into: Map<number, LiveRedirect[]>): Promise<void> {
  if (ids.length === 0) return;
  // A redirect whose MBID is itself an entity is left out, as the import leaves it out.
  const rows = await q<LiveRedirect>(
    `SELECT x.gid::text AS gid, x.new_id FROM musicbrainz.${table}_gid_redirect x
      WHERE x.new_id = ANY($1::int[]) AND NOT EXISTS (SELECT 1 FROM musicbrainz.${table} t WHERE t.gid = x.gid) ORDER BY x.gid`,
    [ids],
  );
  for (const r of rows) {
    const list = into.get(r.new_id) ?? [];
    list.push(r);
    into.set(r.new_id, list);
  }
}

/**
 * Reads the releases and groups asked for, in the snapshot `q` runs in: each release with
 * its date, images, their types and the MBIDs merged into it; each group (and every group of
 * a release read) with its chosen cover (whose release is read too) and its merged MBIDs.
 */
export async function readBatch(q: LiveQuery, types: LiveTypes, releaseIds: Iterable<number>, groupIds: Iterable<number>, skip: SkipRow): Promise<LiveBatch> {
  const batch: LiveBatch = {
    askedReleases: new Set(releaseIds),
    askedGroups: new Set(groupIds),
    releases: new Map(),
    groups: new Map(),
    images: new Map(),
    releaseRedirects: new Map(),
    groupRedirects: new Map(),
    groupCovers: new Map(),
  };
  await readReleaseRows(q, [...batch.askedReleases], batch);
  for (const r of batch.releases.values()) batch.askedGroups.add(r.release_group);
  const groups = [...batch.askedGroups];
  if (groups.length > 0) {
    const covers = await q<{ release_group: number; release: number }>(
      `SELECT release_group, release FROM cover_art_archive.release_group_cover_art WHERE release_group = ANY($1::int[])`,
      [groups],
    );
    const extra = covers.map((c) => c.release).filter((id) => !batch.askedReleases.has(id));
    for (const id of extra) batch.askedReleases.add(id);
    await readReleaseRows(q, extra, batch);
    for (const c of covers) {
      if (batch.releases.get(c.release)?.release_group === c.release_group) batch.groupCovers.set(c.release_group, c.release);
      else skip('release_group_cover_art: release not in that group', `${c.release_group} → ${c.release}`);
    }
  }
  await readGroupRows(q, [...batch.askedGroups], batch);
  for (const [id, r] of batch.releases) {
    if (!batch.groups.has(r.release_group)) {
      skip('release: release group not found', r.gid);
      batch.releases.delete(id);
    }
  }
  const present = [...batch.releases.keys()];
  batch.images = await readImages(q, COVER_ART, present, types, skip);
  await readRedirects(q, 'release', present, batch.releaseRedirects);
  await readRedirects(q, 'release_group', [...batch.groups.keys()], batch.groupRedirects);
  return batch;
}

/** What the mirror holds for the events asked for, in one snapshot. */
export interface LiveEventBatch {
  /** Every event asked for; absent from `events`: not in the mirror. */
  asked: Set<number>;
  events: Map<number, LiveEvent>;
  /** By event id, in listing order (ordering, id). */
  images: Map<number, LiveImage[]>;
  redirects: Map<number, LiveRedirect[]>;
}

/** Reads the events asked for (the Event Art Archive followed), with their images, types and merged MBIDs, in the snapshot `q` runs in. */
export async function readEventBatch(q: LiveQuery, types: LiveTypes, eventIds: Iterable<number>, skip: SkipRow): Promise<LiveEventBatch> {
  const asked = new Set(eventIds);
  const events = new Map<number, LiveEvent>();
  if (asked.size > 0) for (const e of await q<LiveEvent>(`SELECT id, gid::text AS gid, name FROM musicbrainz.event WHERE id = ANY($1::int[])`, [[...asked]])) events.set(e.id, e);
  const present = [...events.keys()];
  const redirects = new Map<number, LiveRedirect[]>();
  await readRedirects(q, 'event', present, redirects);
  return { asked, events, images: await readImages(q, EVENT_ART, present, types, skip), redirects };
}
