import { sql } from 'kysely';
import type { Db } from '../db/schema.js';

/** Rows of `listing_refresh` kept: a process that fell further behind empties its caches instead. */
const LISTING_REFRESH_KEPT = 1000;

/**
 * Records that the release `gid`'s listing was rewritten with new measures (a file fetched
 * through or made on demand; docs/decisions.md, "A listing refreshed is forgotten per release"),
 * after its index.json was written: serving processes forget that release's cached answers at
 * their next look, and nothing else. One transaction: the counter row's lock orders the rows.
 */
export async function recordListingRefresh(db: Db, gid: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .updateTable('counter')
      .set({ value: sql`value + 1` })
      .where('name', '=', 'listing_refreshed')
      .execute();
    const seq = Number((await trx.selectFrom('counter').select('value').where('name', '=', 'listing_refreshed').executeTakeFirstOrThrow()).value);
    await trx.insertInto('listing_refresh').values({ seq, gid }).execute();
    await trx.deleteFrom('listing_refresh').where('seq', '<=', seq - LISTING_REFRESH_KEPT).execute();
  });
}

/**
 * The releases whose listings were refreshed after `since` (the counter's value last seen), and
 * the counter now; 'all' when more than the rows kept went by (every cached answer is then suspect).
 */
export async function listingRefreshesSince(db: Db, since: number | undefined): Promise<{ seq: number; gids: string[] | 'all' }> {
  const seq = Number((await db.selectFrom('counter').select('value').where('name', '=', 'listing_refreshed').executeTakeFirstOrThrow()).value);
  if (since === undefined || seq === since) return { seq, gids: [] };
  if (seq < since || seq - since > LISTING_REFRESH_KEPT) return { seq, gids: 'all' };
  const rows = await db.selectFrom('listing_refresh').select(['seq', 'gid']).where('seq', '>', since).where('seq', '<=', seq).execute();
  // Rows taken between the two reads by the trim: the answer cannot be trusted whole.
  if (rows.length !== seq - since) return { seq, gids: 'all' };
  return { seq, gids: [...new Set(rows.map((r) => r.gid))] };
}
