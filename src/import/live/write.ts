/*
 * Writes what the mirror holds for some releases and groups (read.ts) into sleeve's own
 * tables, as `sleeve import musicbrainz` would have written the same rows (imported = 1,
 * by MusicBrainz id), in one transaction: a release's rows always come from one snapshot of
 * the mirror. Only what differs is written; each release whose listing changed gets a new
 * revision and, when its index.json was written before, is marked for rewriting
 * (index_dirty), and the catalogue version moves so every serving process empties its caches.
 * The images are written by write-images.ts (uploads made here kept after the mirror's); the
 * events by write-events.ts, with the redirect helpers here.
 */
import { sql } from 'kysely';
import type { Db, Database } from '../../db/schema.js';
import type { Transaction } from 'kysely';
import type { Affected } from './changes.js';
import type { LiveArtType, LiveBatch, LiveRedirect, LiveTypes, SkipRow } from './read.js';
import { chunks, COVER_ART_TABLES, imagesDiffer, replaceImages, sleeveImages, upsertMany, type Rewrite } from './write-images.js';

type Trx = Transaction<Database>;

export interface WriteResult {
  /** Releases whose listing changed (written, removed, or an image moved away). */
  releases: number[];
  /** Release groups whose answer changed. */
  groups: number[];
}

/** Which rows of `table` hold these MBIDs now (MBID → id). */
export async function idsByGid(trx: Trx, table: 'release' | 'release_group' | 'event', gids: string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const part of chunks(gids)) for (const r of await trx.selectFrom(table).select(['id', 'gid']).where('gid', 'in', part).execute()) out.set(r.gid, r.id);
  return out;
}

export async function redirectsOf(trx: Trx, table: RedirectTable, ids: number[]): Promise<Map<number, string[]>> {
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

export const sameRedirects = (a: string[] | undefined, b: LiveRedirect[] | undefined) => JSON.stringify(a ?? []) === JSON.stringify((b ?? []).map((r) => r.gid));

type RedirectTable = 'release_gid_redirect' | 'release_group_gid_redirect' | 'event_gid_redirect';

/**
 * Makes the imported MBIDs merged into `id` those of the mirror (`live`). An MBID still held by
 * an imported entity (one the mirror merged away, whose removal a later batch of the pass
 * writes) adds `id` to `deferred`, when given, to be written again once the pass's batches are
 * done; without `deferred`, or held by an entity made here, it is skipped and logged.
 */
export async function writeRedirects(trx: Trx, table: RedirectTable, entity: 'release' | 'release_group' | 'event', id: number, live: LiveRedirect[], skip: SkipRow, deferred?: Set<number>): Promise<void> {
  const keep = live.map((r) => r.gid);
  let del = trx.deleteFrom(table).where('new_id', '=', id).where('imported', '=', 1);
  if (keep.length > 0) del = del.where('gid', 'not in', keep);
  await del.execute();
  for (const r of live) {
    // An MBID that is an entity in sleeve (one made here) stays that entity.
    const holder = await trx.selectFrom(entity).select('imported').where('gid', '=', r.gid).executeTakeFirst();
    if (holder !== undefined && holder.imported === 1 && deferred !== undefined) {
      deferred.add(id);
      continue;
    }
    if (holder !== undefined) {
      skip(`${table}: MBID is itself a ${entity} in sleeve`, r.gid);
      continue;
    }
    await trx
      .insertInto(table)
      .values({ gid: r.gid, new_id: id, imported: 1 })
      .onConflict((oc) => oc.column('gid').doUpdateSet({ new_id: id, imported: 1 }))
      .execute();
  }
}

/** Writes one archive's art types (`art_type`, or `event_art_kind` for the Event Art Archive's); answers whether any changed. */
async function writeArtTypes(trx: Trx, table: 'art_type' | 'event_art_kind', artTypes: LiveArtType[], skip: SkipRow): Promise<boolean> {
  let changed = false;
  for (const t of artTypes) {
    const have = await trx.selectFrom(table).selectAll().where((eb) => eb.or([eb('id', '=', t.id), eb('name', '=', t.name)])).execute();
    if (have.some((h) => h.id !== t.id)) {
      skip(`${table}: name used by another art type`, `${t.id} ${t.name}`);
      continue;
    }
    const h = have[0];
    if (h !== undefined && h.name === t.name && h.parent === t.parent && h.child_order === t.child_order && h.description === t.description && h.gid === t.gid) continue;
    const row = { name: t.name, parent: t.parent, child_order: t.child_order, description: t.description, gid: t.gid };
    await trx.insertInto(table).values({ id: t.id, ...row }).onConflict((oc) => oc.column('id').doUpdateSet(row)).execute();
    changed = true;
  }
  return changed;
}

/** Writes the art and image types of the mirror (new ones added, changed ones updated). */
export async function writeTypes(db: Db, types: LiveTypes, skip: SkipRow): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    let changed = await writeArtTypes(trx, 'art_type', types.artTypes, skip);
    if (types.eventKinds !== undefined && (await writeArtTypes(trx, 'event_art_kind', types.eventKinds, skip))) changed = true;
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
export async function writeBatch(db: Db, batch: LiveBatch, now: number, skip: SkipRow, deferred?: Affected): Promise<WriteResult> {
  return db.transaction().execute(async (trx) => {
    const w = new BatchWriter(trx, batch, skip, deferred);
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
    /** Where releases and groups whose merged MBIDs wait for a later batch's removal are noted (writeRedirects). */
    private readonly deferred: Affected | undefined,
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
      if (sameRedirects(have.get(id), batch.releaseRedirects.get(id))) continue;
      await writeRedirects(trx, 'release_gid_redirect', 'release', id, batch.releaseRedirects.get(id) ?? [], this.skip, this.deferred?.releases);
      this.changedReleases.add(id);
    }
    const groups = [...batch.groups.keys()].filter((id) => !this.refusedGroups.has(id));
    const haveGroups = await redirectsOf(trx, 'release_group_gid_redirect', groups);
    for (const id of groups) {
      if (sameRedirects(haveGroups.get(id), batch.groupRedirects.get(id))) continue;
      await writeRedirects(trx, 'release_group_gid_redirect', 'release_group', id, batch.groupRedirects.get(id) ?? [], this.skip, this.deferred?.groups);
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
    const images = await sleeveImages(trx, COVER_ART_TABLES, ids);
    const holders = await idsByGid(trx, 'release', [...batch.releases.values()].map((r) => r.gid));
    const rows: Record<string, unknown>[] = [];
    const rewrite: Rewrite[] = [];
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
      const mine = images.get(r.id) ?? [];
      if (imagesDiffer(live, mine)) {
        rewrite.push([r.id, live, mine]);
        this.changedReleases.add(r.id);
        this.changedGroups.add(r.release_group);
      }
    }
    await upsertMany(trx, 'release', 'id', rows);
    await this.writeImages(rewrite);
  }

  /** Replaces the imported images of releases with the mirror's (images made here stay, after them). */
  private async writeImages(rewrite: Rewrite[]): Promise<void> {
    const r = await replaceImages(this.trx, COVER_ART_TABLES, rewrite, this.skip);
    this.imageDelta += r.delta;
    for (const id of r.movedFrom) this.changedReleases.add(id);
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
