import type { Db } from '../../db/schema.js';
import type { ListingUrls } from './listing.js';
import type { Queryable } from '../catalogue/repo.js';

/** The public URLs in force, and their version (0: none published yet, the writer's own were used). */
export interface PublishedUrls {
  urls: ListingUrls;
  version: number;
}

const NAMES = ['listing_base_url', 'musicbrainz_url', 'listing_urls_version'];

/**
 * The public URLs the serving processes published (`setting` rows written by `sleeve serve`
 * at start), which every index.json is written with, whichever process writes it: so a
 * command run without the server's SLEEVE_BASE_URL cannot write other URLs into listings.
 * Undefined before any server ran on this database.
 */
export async function readPublishedUrls(db: Queryable): Promise<PublishedUrls | undefined> {
  const rows = await db.selectFrom('setting').select(['name', 'value']).where('name', 'in', NAMES).execute();
  const get = (name: string) => rows.find((r) => r.name === name)?.value;
  const baseUrl = get('listing_base_url');
  const musicBrainzUrl = get('musicbrainz_url');
  const version = Number(get('listing_urls_version'));
  if (baseUrl === undefined || musicBrainzUrl === undefined || !Number.isSafeInteger(version)) return undefined;
  return { urls: { baseUrl, musicBrainzUrl }, version };
}

/**
 * Publishes a serving process's public URLs. When they differ from those in force (or none
 * were), a new version is recorded and every release whose index.json sleeve wrote with
 * other URLs is marked for rewriting (in the same transaction); the caller then finishes
 * them. Answers the previous URLs and how many listings were marked.
 */
export async function publishUrls(db: Db, urls: ListingUrls, now: number): Promise<{ previous: ListingUrls | undefined; marked: number } | undefined> {
  return db.transaction().execute(async (trx) => {
    const current = await readPublishedUrls(trx);
    if (current !== undefined && current.urls.baseUrl === urls.baseUrl && current.urls.musicBrainzUrl === urls.musicBrainzUrl) return undefined;
    const version = (current?.version ?? 0) + 1;
    const values: [string, string][] = [
      ['listing_base_url', urls.baseUrl],
      ['musicbrainz_url', urls.musicBrainzUrl],
      ['listing_urls_version', String(version)],
    ];
    for (const [name, value] of values) {
      await trx
        .insertInto('setting')
        .values({ name, value })
        .onConflict((oc) => oc.column('name').doUpdateSet({ value }))
        .execute();
    }
    // Only listings sleeve wrote (index_urls set): a release whose index.json was never written
    // (an import served from archive.org) gets none now either.
    const marked = await trx
      .updateTable('release')
      .set({ index_dirty: Math.max(1, now) })
      .where('index_urls', 'is not', null)
      .where('index_urls', '<>', version)
      .where('index_dirty', '=', 0)
      .executeTakeFirst();
    return { previous: current?.urls, marked: Number(marked.numUpdatedRows) };
  });
}
