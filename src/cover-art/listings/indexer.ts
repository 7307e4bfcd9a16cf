import type { IndexDeps } from '../deps.js';
import { finishPendingEventIndexes } from '../catalogue/events.js';
import { timeOfId } from '../ids.js';
import { indexKey, isMisspelledImageKey, parseImageKey } from '../files/keys.js';
import { buildListing, serializeListing } from './listing.js';
import { readPublishedUrls } from './public-urls.js';
import { coversNeedApproval, listImages, recountCatalogue } from '../catalogue/repo.js';

/**
 * Rewrites a release's index.json from the database and clears its dirty flag, in one
 * transaction that first takes the release's row lock (the write lock on SQLite), so
 * concurrent writers take turns and the last one writes what was committed last. If
 * the file cannot be written the flag stays set and a later pass retries.
 */
export async function writeIndex(deps: IndexDeps, releaseId: number): Promise<void> {
  await deps.db.transaction().execute(async (trx) => {
    const release = await trx.updateTable('release').set({ index_dirty: 0 }).where('id', '=', releaseId).returning('gid').executeTakeFirst();
    if (release === undefined) return;
    // The URLs the servers published (read under the row lock, so a server publishing new ones
    // either comes first and is read here, or marks this listing again after it): never the
    // writer's own, unless no server ever ran here.
    const published = await readPublishedUrls(trx);
    // Which fields: this writer's SLEEVE_LISTING_FIELDS (the published URLs carry none).
    const listing = buildListing({ ...(published?.urls ?? deps.urls), fields: deps.urls.fields, thumbnailFormats: deps.urls.thumbnailFormats }, release.gid, await listImages(trx, releaseId), coversNeedApproval(deps.approval));
    await deps.store.put(indexKey(release.gid), Buffer.from(serializeListing(listing), 'utf8'), 'application/json; charset=utf-8');
    await trx.updateTable('release').set({ index_urls: published?.version ?? 0 }).where('id', '=', releaseId).execute();
  });
}

/**
 * Rewrites every index.json left dirty by an interrupted change, or only those dirty
 * since before `olderThan` (epoch ms), so a change still in progress is left to finish.
 */
export async function finishPendingIndexes(deps: IndexDeps, olderThan = Number.MAX_SAFE_INTEGER): Promise<number> {
  // `> 0`, not `!= 0`: a range the index answers directly, however many clean releases there are.
  const dirty = await deps.db.selectFrom('release').select('id').where('index_dirty', '>', 0).where('index_dirty', '<', olderThan).execute();
  for (const { id } of dirty) await writeIndex(deps, id);
  // Events' listings too (cover-art/catalogue/events.ts): the same dirty marks, in their own table.
  return dirty.length + (await finishPendingEventIndexes(deps, olderThan));
}

/** Files older than this that no row names are leftovers of an interrupted upload. */
const ORPHAN_AGE_MS = 60 * 60 * 1000;

/**
 * Rebuilds index.json for one release (by internal id) or for all releases that have
 * images (then also recounting releases and images for the metrics), and removes image
 * files no row names whose id and file are more than an hour old, files named with an id
 * spelled otherwise than the catalogue spells it (keys.ts, isMisspelledImageKey) and, in a
 * file store, part-written files an older sleeve left beside them.
 */
export async function reindex(deps: IndexDeps & { now: number }, releaseIds?: number[]): Promise<{ releases: number; orphansRemoved: number }> {
  const ids =
    releaseIds ??
    (await deps.db.selectFrom('release').select('id').where((eb) => eb.exists(eb.selectFrom('cover_art').select('id').whereRef('cover_art.release', '=', 'release.id'))).orderBy('id').execute()).map((r) => r.id);
  let orphansRemoved = 0;
  for (const id of ids) {
    await writeIndex(deps, id);
    const release = await deps.db.selectFrom('release').select('gid').where('id', '=', id).executeTakeFirst();
    if (release === undefined) continue;
    orphansRemoved += await deps.store.removeStrayTemporary(`mbid-${release.gid}`, deps.now);
    const known = new Set((await deps.db.selectFrom('cover_art').select('id').where('release', '=', id).execute()).map((r) => r.id));
    for (const key of await deps.store.list(`mbid-${release.gid}/`)) {
      const parsed = parseImageKey(key);
      if (parsed === undefined && isMisspelledImageKey(key)) {
        // A second name of an image (no file is ever made under one now): nothing reads it.
        await deps.store.delete(key);
        orphansRemoved++;
        continue;
      }
      if (parsed === undefined || known.has(parsed.id) || deps.now - timeOfId(parsed.id) < ORPHAN_AGE_MS) continue;
      // A merge copies old ids into the folder before its commit: judge by the file's age too.
      const info = await deps.store.head(key);
      if (info === undefined || deps.now - info.lastModified.getTime() < ORPHAN_AGE_MS) continue;
      await deps.store.delete(key);
      orphansRemoved++;
    }
  }
  // A full pass also corrects the release and image counts of the metrics (bulk writers bypass them).
  if (releaseIds === undefined) await recountCatalogue(deps.db);
  return { releases: ids.length, orphansRemoved };
}
