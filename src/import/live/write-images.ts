/*
 * The images of releases and events as the mirror has them, written into sleeve's tables of
 * either archive (cover_art and cover_art_type, or event_art and event_art_type: the same
 * shape, docs/decisions.md, "Events beside releases"), inside the caller's transaction.
 * Images uploaded to sleeve (imported = 0) stay, ordered after the mirror's, in their order,
 * as `sleeve import musicbrainz` orders them after a dump's.
 */
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import type { LiveImage, SkipRow } from './read.js';

type Trx = Transaction<Database>;

/** One archive's tables in sleeve. */
interface ImageTables {
  images: 'cover_art' | 'event_art';
  types: 'cover_art_type' | 'event_art_type';
  /** The images' column naming their release or event. */
  owner: 'release' | 'event';
  /** The art types their types name. */
  kinds: 'art_type' | 'event_art_kind';
  /** The other archive's images: uploads take their ids from one counter for both. */
  other: 'cover_art' | 'event_art';
}

export const COVER_ART_TABLES: ImageTables = { images: 'cover_art', types: 'cover_art_type', owner: 'release', kinds: 'art_type', other: 'event_art' };
export const EVENT_ART_TABLES: ImageTables = { images: 'event_art', types: 'event_art_type', owner: 'event', kinds: 'event_art_kind', other: 'cover_art' };

const CHUNK = 500;
/** Rows per multi-row INSERT (SQLite allows 32,766 bound values a statement; rows here have at most 13). */
const ROWS_PER_INSERT = 200;

export function chunks<T>(list: T[], size = CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size));
  return out;
}

/** Writes rows (all with the same columns) by `key`: new ones inserted, existing ones updated, a few hundred a statement. */
export async function upsertMany(trx: Trx, table: 'release' | 'release_group' | 'cover_art' | 'event' | 'event_art', key: 'id', rows: Record<string, unknown>[]): Promise<void> {
  if (rows.length === 0) return;
  const columns = Object.keys(rows[0] as object).filter((c) => c !== key);
  const t = trx as unknown as Kysely<any>;
  for (const part of chunks(rows, ROWS_PER_INSERT)) {
    await t
      .insertInto(table)
      .values(part)
      .onConflict((oc) => oc.column(key).doUpdateSet((eb) => Object.fromEntries(columns.map((c) => [c, eb.ref(`excluded.${c}`)]))))
      .execute();
  }
}

interface SleeveImage extends LiveImage {
  imported: number;
}

const IMAGE_COLUMNS = ['id', 'comment', 'edit', 'ordering', 'date_uploaded', 'approved', 'mime_type', 'filesize', 'thumb_250_filesize', 'thumb_500_filesize', 'thumb_1200_filesize', 'imported'];

/** What sleeve holds now for these releases (or events), by owner in listing order: imported images and images uploaded here. */
export async function sleeveImages(trx: Trx, t: ImageTables, ownerIds: number[]): Promise<Map<number, SleeveImage[]>> {
  const db = trx as unknown as Kysely<any>;
  const out = new Map<number, SleeveImage[]>();
  for (const ids of chunks(ownerIds)) {
    const rows: Record<string, unknown>[] = await db
      .selectFrom(t.images)
      .select([...IMAGE_COLUMNS, `${t.owner} as owner`])
      .where(t.owner, 'in', ids)
      .orderBy(t.owner)
      .orderBy('ordering')
      .orderBy('id')
      .execute();
    const types = new Map<number, number[]>();
    for (const part of chunks(rows.map((r) => Number(r.id)))) {
      const typeRows: { id: unknown; type_id: unknown }[] = await db.selectFrom(t.types).select(['id', 'type_id']).where('id', 'in', part).orderBy('id').orderBy('type_id').execute();
      for (const x of typeRows) types.set(Number(x.id), [...(types.get(Number(x.id)) ?? []), Number(x.type_id)]);
    }
    for (const r of rows) {
      const image = { ...normalizeImage(r), imported: Number(r.imported), types: types.get(Number(r.id)) ?? [] };
      out.set(image.owner, [...(out.get(image.owner) ?? []), image]);
    }
  }
  return out;
}

function normalizeImage(r: Record<string, unknown>): Omit<LiveImage, 'types'> {
  const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    id: Number(r.id),
    owner: Number(r.owner),
    comment: String(r.comment),
    edit: Number(r.edit),
    ordering: Number(r.ordering),
    date_uploaded: Number(r.date_uploaded),
    approved: Number(r.approved),
    mime_type: String(r.mime_type),
    filesize: n(r.filesize),
    thumb_250_filesize: n(r.thumb_250_filesize),
    thumb_500_filesize: n(r.thumb_500_filesize),
    thumb_1200_filesize: n(r.thumb_1200_filesize),
  };
}

function imageSignature(i: LiveImage): string {
  return JSON.stringify([
    i.id,
    i.comment,
    i.edit,
    i.ordering,
    i.date_uploaded,
    i.approved,
    i.mime_type,
    i.filesize,
    i.thumb_250_filesize,
    i.thumb_500_filesize,
    i.thumb_1200_filesize,
    [...i.types].sort((a, b) => a - b),
  ]);
}

/**
 * Whether an owner's images in sleeve differ from the mirror's: its imported images from
 * `live`, or an image uploaded here not after all of them (a reorder made here, or an upload
 * from before the mirror's last images).
 */
export function imagesDiffer(live: LiveImage[], mine: SleeveImage[]): boolean {
  const imported = mine.filter((i) => i.imported === 1);
  if (JSON.stringify(live.map(imageSignature)) !== JSON.stringify(imported.map(imageSignature))) return true;
  const last = Math.max(0, ...live.map((i) => i.ordering));
  return live.length > 0 && mine.some((i) => i.imported === 0 && i.ordering <= last);
}

/** An owner whose imported images are replaced: its id, the mirror's images, and what sleeve holds. */
export type Rewrite = [owner: number, live: LiveImage[], mine: SleeveImage[]];

interface ReplaceResult {
  /** Images added less images removed. */
  delta: number;
  /** Owners whose images moved to an owner of the batch (their listings changed too). */
  movedFrom: Set<number>;
}

/** Replaces the imported images of some releases (or events) with the mirror's; images uploaded here stay, after them. */
export async function replaceImages(trx: Trx, t: ImageTables, rewrite: Rewrite[], skip: SkipRow): Promise<ReplaceResult> {
  const db = trx as unknown as Kysely<any>;
  const result: ReplaceResult = { delta: 0, movedFrom: new Set() };
  const gone: number[] = [];
  for (const [, live, mine] of rewrite) {
    const keep = new Set(live.map((i) => i.id));
    for (const i of mine) if (i.imported === 1 && !keep.has(i.id)) gone.push(i.id);
  }
  for (const part of chunks(gone)) result.delta -= Number((await db.deleteFrom(t.images).where('id', 'in', part).where('imported', '=', 1).executeTakeFirst()).numDeletedRows);
  const held = new Map<number, { owner: number; imported: number }>();
  const taken = new Set<number>();
  for (const part of chunks(rewrite.flatMap(([, live]) => live.map((i) => i.id)))) {
    for (const h of await db.selectFrom(t.images).select(['id', `${t.owner} as owner`, 'imported']).where('id', 'in', part).execute()) held.set(Number(h.id), { owner: Number(h.owner), imported: Number(h.imported) });
    // The other archive's uploads took their ids from the same counter.
    for (const h of await db.selectFrom(t.other).select('id').where('id', 'in', part).where('imported', '=', 0).execute()) taken.add(Number(h.id));
  }
  const rows: Record<string, unknown>[] = [];
  const types: { id: number; type_id: number }[] = [];
  // An art type sleeve could not take (writeTypes): its rows are left out, as the import leaves them out.
  const kinds = new Set((await db.selectFrom(t.kinds).select('id').execute()).map((a: { id: unknown }) => Number(a.id)));
  for (const [owner, live] of rewrite) {
    for (const image of live) {
      const h = held.get(image.id);
      if ((h !== undefined && h.imported === 0) || taken.has(image.id)) {
        skip(`${t.images}: id taken by an image uploaded to this sleeve`, String(image.id));
        continue;
      }
      // An image that moved here from another owner changes that owner's listing too.
      if (h !== undefined && h.owner !== owner) result.movedFrom.add(h.owner);
      if (h === undefined) result.delta++;
      const { types: typeIds, owner: _o, ...fields } = image;
      rows.push({ ...fields, [t.owner]: owner, imported: 1 });
      for (const type_id of typeIds) {
        if (kinds.has(type_id)) types.push({ id: image.id, type_id });
        else skip(`${t.types}: unknown art type`, `${image.id} type ${type_id}`);
      }
    }
  }
  await upsertMany(trx, t.images, 'id', rows);
  for (const part of chunks(rows.map((r) => r.id as number))) await db.deleteFrom(t.types).where('id', 'in', part).execute();
  for (const part of chunks(types, ROWS_PER_INSERT)) await db.insertInto(t.types).values(part).execute();
  await placeLocalImages(trx, t, rewrite);
  return result;
}

/**
 * Images uploaded here on these releases (or events) come after the mirror's images, in their
 * own order (ordering, id), as the import places them after a dump's. Uploads already after
 * them, and those of an owner without imported images, keep their orderings.
 */
async function placeLocalImages(trx: Trx, t: ImageTables, rewrite: Rewrite[]): Promise<void> {
  const db = trx as unknown as Kysely<any>;
  for (const [owner, , mine] of rewrite) {
    const local = mine.filter((i) => i.imported === 0);
    if (local.length === 0) continue;
    const [top] = await db.selectFrom(t.images).select((eb) => eb.fn.max('ordering').as('m')).where(t.owner, '=', owner).where('imported', '=', 1).execute();
    if (top?.m === null || top?.m === undefined) continue;
    let next = Number(top.m);
    if (local.every((i) => i.ordering > next)) continue;
    // `mine` is in listing order (ordering, id).
    for (const image of local) {
      next++;
      if (image.ordering !== next) await db.updateTable(t.images).set({ ordering: next }).where('id', '=', image.id).where('imported', '=', 0).execute();
    }
  }
}
