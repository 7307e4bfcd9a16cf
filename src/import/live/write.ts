/*
 * Writes what the mirror holds for some releases and groups (read.ts) into sleeve's own
 * tables, as `sleeve import musicbrainz` would have written the same rows (imported = 1,
 * by MusicBrainz id), in one transaction: a release's rows always come from one snapshot of
 * the mirror. Only what differs is written; each release whose listing changed gets a new
 * revision and, when its index.json was written before, is marked for rewriting
 * (index_dirty), and the catalogue version moves so every serving process empties its caches.
 */
import { sql } from 'kysely';
import type { Db, Database } from '../../db/schema.js';
import type { Kysely, Transaction } from 'kysely';
import type { LiveBatch, LiveImage, LiveRedirect, LiveTypes, SkipRow } from './read.js';

type Trx = Transaction<Database>;

export interface WriteResult {
  /** Releases whose listing changed (written, removed, or an image moved away). */
  releases: number[];
  /** Release groups whose answer changed. */
  groups: number[];
}

const CHUNK = 500;
/** Rows per multi-row INSERT (SQLite allows 32,766 bound values a statement; rows here have at most 13). */
const ROWS_PER_INSERT = 200;

function chunks<T>(list: T[], size = CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size));
  return out;
}

/** Writes rows (all with the same columns) by `key`: new ones inserted, existing ones updated, a few hundred a statement. */
async function upsertMany(trx: Trx, table: 'release' | 'release_group' | 'cover_art', key: 'id', rows: Record<string, unknown>[]): Promise<void> {
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

/** Which rows of `table` hold these MBIDs now (MBID → id). */
async function idsByGid(trx: Trx, table: 'release' | 'release_group', gids: string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const part of chunks(gids)) for (const r of await trx.selectFrom(table).select(['id', 'gid']).where('gid', 'in', part).execute()) out.set(r.gid, r.id);
  return out;
}

interface SleeveImage extends Omit<LiveImage, 'types'> {
  imported: number;
  types: number[];
}

/** What sleeve holds now for the releases of the batch (imported rows; local images apart). */
async function sleeveImages(trx: Trx, releaseIds: number[]): Promise<Map<number, SleeveImage[]>> {
  const out = new Map<number, SleeveImage[]>();
  for (const ids of chunks(releaseIds)) {
    const rows = await trx
      .selectFrom('cover_art')
      .select(['id', 'release', 'comment', 'edit', 'ordering', 'date_uploaded', 'approved', 'mime_type', 'filesize', 'thumb_250_filesize', 'thumb_500_filesize', 'thumb_1200_filesize', 'imported'])
      .where('release', 'in', ids)
      .orderBy('release')
      .orderBy('ordering')
      .orderBy('id')
      .execute();
    const types = new Map<number, number[]>();
    if (rows.length > 0) {
      for (const part of chunks(rows.map((r) => Number(r.id)))) {
        for (const t of await trx.selectFrom('cover_art_type').select(['id', 'type_id']).where('id', 'in', part).orderBy('id').orderBy('type_id').execute()) {
          const list = types.get(Number(t.id)) ?? [];
          list.push(Number(t.type_id));
          types.set(Number(t.id), list);
        }
      }
    }
    for (const r of rows) {
      const image = { ...normalizeImage(r), imported: Number(r.imported), types: types.get(Number(r.id)) ?? [] };
      const list = out.get(image.release) ?? [];
      list.push(image);
      out.set(image.release, list);
    }
  }
  return out;
}

function normalizeImage(r: Record<string, unknown>): Omit<LiveImage, 'types'> {
  const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    id: Number(r.id),
    release: Number(r.release),
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

function imageSignature(i: Omit<LiveImage, 'types'> & { types: number[] }): string {
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

async function redirectsOf(trx: Trx, table: 'release_gid_redirect' | 'release_group_gid_redirect', ids: number[]): Promise<Map<number, string[]>> {
  const out = new Map<number, string[]>();
  for (const part of chunks(ids)) {
    for (const r of await trx.selectFrom(table).select(['gid', 'new_id']).where('new_id', 'in', part).where('imported', '=', 1).orderBy('gid').execute()) {
      const list = out.get(r.new_id) ?? [];
      list.push(r.gid);
      out.set(r.new_id, list);
    }
  }
  return out;
}

const same = (a: string[] | undefined, b: LiveRedirect[] | undefined) => JSON.stringify(a ?? []) === JSON.stringify((b ?? []).map((r) => r.gid));

/** Writes the art and image types of the mirror (new ones added, changed ones updated). */
export async function writeTypes(db: Db, types: LiveTypes, skip: SkipRow): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    let changed = false;
    for (const t of types.artTypes) {
      const have = await trx.selectFrom('art_type').selectAll().where((eb) => eb.or([eb('id', '=', t.id), eb('name', '=', t.name)])).execute();
      if (have.some((h) => h.id !== t.id)) {
        skip('art_type: name used by another art type', `${t.id} ${t.name}`);
        continue;
      }
      const h = have[0];
      if (h !== undefined && h.name === t.name && h.parent === t.parent && h.child_order === t.child_order && h.description === t.description && h.gid === t.gid) continue;
      const row = { name: t.name, parent: t.parent, child_order: t.child_order, description: t.description, gid: t.gid };
      await trx.insertInto('art_type').values({ id: t.id, ...row }).onConflict((oc) => oc.column('id').doUpdateSet(row)).execute();
      changed = true;
    }
    for (const [mime_type, suffix] of types.imageTypes) {
      const h = await trx.selectFrom('image_type').select('suffix').where('mime_type', '=', mime_type).executeTakeFirst();
      if (h?.suffix === suffix) continue;
      await trx.insertInto('image_type').values({ mime_type, suffix }).onConflict((oc) => oc.column('mime_type').doUpdateSet({ suffix })).execute();
      changed = true;
    }
    return changed;
  });
}

/** Applies the batch to sleeve's tables in one transaction; answers what changed. */
export async function writeBatch(db: Db, batch: LiveBatch, now: number, skip: SkipRow): Promise<WriteResult> {
  return db.transaction().execute(async (trx) => {
    const w = new BatchWriter(trx, batch, skip);
    await w.groups();
    await w.releases();
    // After the removals: a merged release's MBID is free for its redirect only once the release is gone.
    await w.removals();
    await w.redirects();
    await w.groupCovers();
    return w.finish(now);
  });
}

class BatchWriter {
  private readonly changedReleases = new Set<number>();
  private readonly changedGroups = new Set<number>();
  /** Releases and groups of the batch sleeve cannot take (an id or MBID held by a row made here). */
  private readonly refused = new Set<number>();
  private readonly refusedGroups = new Set<number>();
  private releaseDelta = 0;
  private imageDelta = 0;

  constructor(
    private readonly trx: Trx,
    private readonly batch: LiveBatch,
    private readonly skip: SkipRow,
  ) {}

  async groups(): Promise<void> {
    const { trx, batch } = this;
    const ids = [...batch.groups.keys()];
    const have = new Map<number, { gid: string; name: string; imported: number }>();
    for (const part of chunks(ids)) for (const g of await trx.selectFrom('release_group').select(['id', 'gid', 'name', 'imported']).where('id', 'in', part).execute()) have.set(g.id, g);
    const holders = await idsByGid(trx, 'release_group', [...batch.groups.values()].map((g) => g.gid));
    const rows: Record<string, unknown>[] = [];
    for (const g of batch.groups.values()) {
      const h = have.get(g.id);
      if (h !== undefined && h.imported === 0 && h.gid !== g.gid) {
        this.skip('release_group: id held by a group made in sleeve', g.gid);
        this.refusedGroups.add(g.id);
        continue;
      }
      if ((holders.get(g.gid) ?? g.id) !== g.id) {
        this.skip('release_group: MBID held by another group in sleeve', g.gid);
        this.refusedGroups.add(g.id);
        continue;
      }
      if (h === undefined || h.gid !== g.gid || h.name !== g.name || h.imported !== 1) {
        rows.push({ id: g.id, gid: g.gid, name: g.name, imported: 1 });
        this.changedGroups.add(g.id);
      }
    }
    await upsertMany(trx, 'release_group', 'id', rows);
  }

  /** The MBIDs merged into the releases and groups of the batch, as the mirror has them. */
  async redirects(): Promise<void> {
    const { trx, batch } = this;
    const releases = [...batch.releases.keys()].filter((id) => !this.refused.has(id));
    const have = await redirectsOf(trx, 'release_gid_redirect', releases);
    for (const id of releases) {
      if (same(have.get(id), batch.releaseRedirects.get(id))) continue;
      await this.writeRedirects('release_gid_redirect', 'release', id, batch.releaseRedirects.get(id) ?? []);
      this.changedReleases.add(id);
    }
    const groups = [...batch.groups.keys()].filter((id) => !this.refusedGroups.has(id));
    const haveGroups = await redirectsOf(trx, 'release_group_gid_redirect', groups);
    for (const id of groups) {
      if (same(haveGroups.get(id), batch.groupRedirects.get(id))) continue;
      await this.writeRedirects('release_group_gid_redirect', 'release_group', id, batch.groupRedirects.get(id) ?? []);
      this.changedGroups.add(id);
    }
  }

  async releases(): Promise<void> {
    const { trx, batch } = this;
    const ids = [...batch.releases.keys()];
    const have = new Map<number, { gid: string; name: string; release_group: number; date_year: number | null; date_month: number | null; date_day: number | null; imported: number }>();
    for (const part of chunks(ids)) {
      for (const r of await trx.selectFrom('release').select(['id', 'gid', 'name', 'release_group', 'date_year', 'date_month', 'date_day', 'imported']).where('id', 'in', part).execute()) have.set(r.id, r);
    }
    const images = await sleeveImages(trx, ids);
    const holders = await idsByGid(trx, 'release', [...batch.releases.values()].map((r) => r.gid));
    const rows: Record<string, unknown>[] = [];
    const rewrite: [number, LiveImage[], SleeveImage[]][] = [];
    for (const r of batch.releases.values()) {
      const h = have.get(r.id);
      if (this.refusedGroups.has(r.release_group) || (h !== undefined && h.imported === 0 && h.gid !== r.gid)) {
        this.skip('release: id held by a release made in sleeve (or its group refused)', r.gid);
        this.refused.add(r.id);
        continue;
      }
      if ((holders.get(r.gid) ?? r.id) !== r.id) {
        this.skip('release: MBID held by another release in sleeve', r.gid);
        this.refused.add(r.id);
        continue;
      }
      const row = { gid: r.gid, name: r.name, release_group: r.release_group, date_year: r.date_year, date_month: r.date_month, date_day: r.date_day, imported: 1 };
      if (h === undefined || Object.entries(row).some(([k, v]) => (h as Record<string, unknown>)[k] !== v)) {
        if (h === undefined) this.releaseDelta++;
        else if (h.release_group !== r.release_group) this.changedGroups.add(h.release_group);
        rows.push({ id: r.id, ...row });
        this.changedReleases.add(r.id);
        this.changedGroups.add(r.release_group);
      }
      const live = batch.images.get(r.id) ?? [];
      const mine = (images.get(r.id) ?? []).filter((i) => i.imported === 1);
      if (JSON.stringify(live.map(imageSignature)) !== JSON.stringify(mine.map(imageSignature))) {
        rewrite.push([r.id, live, mine]);
        this.changedReleases.add(r.id);
        this.changedGroups.add(r.release_group);
      }
    }
    await upsertMany(trx, 'release', 'id', rows);
    await this.writeImages(rewrite);
  }

  /** Replaces the imported images of releases with the mirror's (images made here stay). */
  private async writeImages(rewrite: [number, LiveImage[], SleeveImage[]][]): Promise<void> {
    const { trx } = this;
    const gone: number[] = [];
    for (const [, live, mine] of rewrite) {
      const keep = new Set(live.map((i) => i.id));
      for (const i of mine) if (!keep.has(i.id)) gone.push(i.id);
    }
    for (const part of chunks(gone)) this.imageDelta -= Number((await trx.deleteFrom('cover_art').where('id', 'in', part).where('imported', '=', 1).executeTakeFirst()).numDeletedRows);
    const held = new Map<number, { release: number; imported: number }>();
    for (const part of chunks(rewrite.flatMap(([, live]) => live.map((i) => i.id)))) {
      for (const h of await trx.selectFrom('cover_art').select(['id', 'release', 'imported']).where('id', 'in', part).execute()) held.set(Number(h.id), h);
    }
    const rows: Record<string, unknown>[] = [];
    const types: { id: number; type_id: number }[] = [];
    // An art type sleeve could not take (writeTypes): its rows are left out, as the import leaves them out.
    const artTypes = new Set((await trx.selectFrom('art_type').select('id').execute()).map((a) => a.id));
    for (const [releaseId, live] of rewrite) {
      for (const image of live) {
        const h = held.get(image.id);
        if (h !== undefined && h.imported === 0) {
          this.skip('cover_art: id taken by an image uploaded to this sleeve', String(image.id));
          continue;
        }
        // An image that moved here from another release changes that release's listing too.
        if (h !== undefined && h.release !== releaseId) this.changedReleases.add(h.release);
        if (h === undefined) this.imageDelta++;
        const { types: typeIds, ...fields } = image;
        rows.push({ ...fields, release: releaseId, imported: 1 });
        for (const type_id of typeIds) {
          if (artTypes.has(type_id)) types.push({ id: image.id, type_id });
          else this.skip('cover_art_type: unknown art type', `${image.id} type ${type_id}`);
        }
      }
    }
    await upsertMany(trx, 'cover_art', 'id', rows);
    for (const part of chunks(rows.map((r) => r.id as number))) await trx.deleteFrom('cover_art_type').where('id', 'in', part).execute();
    for (const part of chunks(types, ROWS_PER_INSERT)) await trx.insertInto('cover_art_type').values(part).execute();
  }

  private async writeRedirects(table: 'release_gid_redirect' | 'release_group_gid_redirect', entity: 'release' | 'release_group', id: number, live: LiveRedirect[]): Promise<void> {
    const { trx } = this;
    const keep = live.map((r) => r.gid);
    let del = trx.deleteFrom(table).where('new_id', '=', id).where('imported', '=', 1);
    if (keep.length > 0) del = del.where('gid', 'not in', keep);
    await del.execute();
    for (const r of live) {
      // An MBID that is an entity in sleeve (one made here) stays that entity.
      if ((await trx.selectFrom(entity).select('id').where('gid', '=', r.gid).executeTakeFirst()) !== undefined) {
        this.skip(`${table}: MBID is itself a ${entity} in sleeve`, r.gid);
        continue;
      }
      await trx
        .insertInto(table)
        .values({ gid: r.gid, new_id: id, imported: 1 })
        .onConflict((oc) => oc.column('gid').doUpdateSet({ new_id: id, imported: 1 }))
        .execute();
    }
  }

  /** Releases and groups asked for that the mirror no longer has: gone, unless images or releases made here hang on them. */
  async removals(): Promise<void> {
    const { trx, batch } = this;
    const goneReleases = [...batch.askedReleases].filter((id) => !batch.releases.has(id));
    for (const part of chunks(goneReleases)) {
      const rows = await trx.selectFrom('release').select(['id', 'release_group']).where('id', 'in', part).where('imported', '=', 1).execute();
      for (const r of rows) {
        const images = await trx.deleteFrom('cover_art').where('release', '=', r.id).where('imported', '=', 1).executeTakeFirst();
        this.imageDelta -= Number(images.numDeletedRows);
        await trx.deleteFrom('release_gid_redirect').where('new_id', '=', r.id).where('imported', '=', 1).execute();
        const local = await trx.selectFrom('cover_art').select('id').where('release', '=', r.id).limit(1).executeTakeFirst();
        if (local !== undefined) await trx.updateTable('release').set({ imported: 0 }).where('id', '=', r.id).execute();
        else {
          await trx.deleteFrom('release').where('id', '=', r.id).execute();
          this.releaseDelta--;
        }
        this.changedReleases.add(r.id);
        this.changedGroups.add(r.release_group);
      }
    }
    const goneGroups = [...batch.askedGroups].filter((id) => !batch.groups.has(id));
    for (const part of chunks(goneGroups)) {
      for (const g of await trx.selectFrom('release_group').select('id').where('id', 'in', part).where('imported', '=', 1).execute()) {
        const left = await trx.selectFrom('release').select('id').where('release_group', '=', g.id).limit(1).executeTakeFirst();
        if (left !== undefined) await trx.updateTable('release_group').set({ imported: 0 }).where('id', '=', g.id).execute();
        else await trx.deleteFrom('release_group').where('id', '=', g.id).execute();
        this.changedGroups.add(g.id);
      }
    }
  }

  /** The chosen release of each group of the batch, as the mirror has it. */
  async groupCovers(): Promise<void> {
    const { trx, batch } = this;
    for (const id of batch.groups.keys()) {
      if (this.refusedGroups.has(id)) continue;
      const have = await trx.selectFrom('release_group_cover_art').select('release').where('release_group', '=', id).executeTakeFirst();
      const want = batch.groupCovers.get(id);
      const usable = want !== undefined && !this.refused.has(want) ? want : undefined;
      if (have?.release === usable) continue;
      if (usable === undefined) await trx.deleteFrom('release_group_cover_art').where('release_group', '=', id).execute();
      else {
        await trx
          .insertInto('release_group_cover_art')
          .values({ release_group: id, release: usable })
          .onConflict((oc) => oc.column('release_group').doUpdateSet({ release: usable }))
          .execute();
      }
      this.changedGroups.add(id);
    }
  }

  /** Marks what changed (revision, index.json to rewrite, the catalogue version, the metrics' counts). */
  async finish(now: number): Promise<WriteResult> {
    const { trx } = this;
    const releases = [...this.changedReleases].sort((a, b) => a - b);
    const groups = [...this.changedGroups].sort((a, b) => a - b);
    for (const part of chunks(releases)) {
      await trx
        .updateTable('release')
        .set((eb) => ({ revision: eb('revision', '+', 1) }))
        .where('id', 'in', part)
        .execute();
      // A listing sleeve wrote before is rewritten; one never written is written when first asked for.
      await trx.updateTable('release').set({ index_dirty: Math.max(1, now) }).where('id', 'in', part).where('index_urls', 'is not', null).execute();
    }
    if (releases.length > 0 || groups.length > 0) {
      await trx.updateTable('counter').set({ value: sql`value + 1` }).where('name', '=', 'catalogue_version').execute();
    }
    if (this.releaseDelta !== 0) await trx.updateTable('counter').set({ value: sql`value + ${this.releaseDelta}` }).where('name', '=', 'releases').execute();
    if (this.imageDelta !== 0) await trx.updateTable('counter').set({ value: sql`value + ${this.imageDelta}` }).where('name', '=', 'images').execute();
    return { releases, groups };
  }
}
