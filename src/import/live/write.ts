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
import type { Transaction } from 'kysely';
import type { LiveBatch, LiveImage, LiveRedirect, LiveTypes, SkipRow } from './read.js';

type Trx = Transaction<Database>;

export interface WriteResult {
  /** Releases whose listing changed (written, removed, or an image moved away). */
  releases: number[];
  /** Release groups whose answer changed. */
  groups: number[];
}

const CHUNK = 500;

function chunks<T>(list: T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += CHUNK) out.push(list.slice(i, i + CHUNK));
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
    for (const g of batch.groups.values()) {
      const h = have.get(g.id);
      if (h !== undefined && h.imported === 0 && h.gid !== g.gid) {
        this.skip('release_group: id held by a group made in sleeve', g.gid);
        this.refusedGroups.add(g.id);
        continue;
      }
      const other = await trx.selectFrom('release_group').select('id').where('gid', '=', g.gid).where('id', '<>', g.id).executeTakeFirst();
      if (other !== undefined) {
        this.skip('release_group: MBID held by another group in sleeve', g.gid);
        this.refusedGroups.add(g.id);
        continue;
      }
      if (h === undefined || h.gid !== g.gid || h.name !== g.name || h.imported !== 1) {
        await trx
          .insertInto('release_group')
          .values({ id: g.id, gid: g.gid, name: g.name, imported: 1 })
          .onConflict((oc) => oc.column('id').doUpdateSet({ gid: g.gid, name: g.name, imported: 1 }))
          .execute();
        this.changedGroups.add(g.id);
      }
    }
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
    for (const r of batch.releases.values()) {
      const h = have.get(r.id);
      if (this.refusedGroups.has(r.release_group) || (h !== undefined && h.imported === 0 && h.gid !== r.gid)) {
        this.skip('release: id held by a release made in sleeve (or its group refused)', r.gid);
        this.refused.add(r.id);
        continue;
      }
      if ((await trx.selectFrom('release').select('id').where('gid', '=', r.gid).where('id', '<>', r.id).executeTakeFirst()) !== undefined) {
        this.skip('release: MBID held by another release in sleeve', r.gid);
        this.refused.add(r.id);
        continue;
      }
      const row = { gid: r.gid, name: r.name, release_group: r.release_group, date_year: r.date_year, date_month: r.date_month, date_day: r.date_day, imported: 1 };
      if (h === undefined || Object.entries(row).some(([k, v]) => (h as Record<string, unknown>)[k] !== v)) {
        if (h === undefined) this.releaseDelta++;
        else if (h.release_group !== r.release_group) this.changedGroups.add(h.release_group);
        await trx
          .insertInto('release')
          .values({ id: r.id, ...row })
          .onConflict((oc) => oc.column('id').doUpdateSet(row))
          .execute();
        this.changedReleases.add(r.id);
        this.changedGroups.add(r.release_group);
      }
      const live = batch.images.get(r.id) ?? [];
      const mine = (images.get(r.id) ?? []).filter((i) => i.imported === 1);
      if (JSON.stringify(live.map(imageSignature)) !== JSON.stringify(mine.map(imageSignature))) {
        await this.writeImages(r.id, live, mine);
        this.changedReleases.add(r.id);
        this.changedGroups.add(r.release_group);
      }
    }
  }

  /** Replaces a release's imported images with the mirror's (images made here stay). */
  private async writeImages(releaseId: number, live: LiveImage[], mine: SleeveImage[]): Promise<void> {
    const { trx } = this;
    const keep = new Set(live.map((i) => i.id));
    const gone = mine.filter((i) => !keep.has(i.id)).map((i) => i.id);
    for (const part of chunks(gone)) this.imageDelta -= Number((await trx.deleteFrom('cover_art').where('id', 'in', part).where('imported', '=', 1).executeTakeFirst()).numDeletedRows);
    for (const image of live) {
      const held = await trx.selectFrom('cover_art').select(['release', 'imported']).where('id', '=', image.id).executeTakeFirst();
      if (held !== undefined && held.imported === 0) {
        this.skip('cover_art: id taken by an image uploaded to this sleeve', String(image.id));
        continue;
      }
      // An image that moved here from another release changes that release's listing too.
      if (held !== undefined && held.release !== releaseId) this.changedReleases.add(held.release);
      if (held === undefined) this.imageDelta++;
      const { types, ...fields } = image;
      const row = { ...fields, release: releaseId, imported: 1 };
      await trx
        .insertInto('cover_art')
        .values(row)
        .onConflict((oc) => oc.column('id').doUpdateSet(row))
        .execute();
      await trx.deleteFrom('cover_art_type').where('id', '=', image.id).execute();
      if (types.length > 0) await trx.insertInto('cover_art_type').values(types.map((type_id) => ({ id: image.id, type_id }))).execute();
    }
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
