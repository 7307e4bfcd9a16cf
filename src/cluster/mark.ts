import { sql } from 'kysely';
import type { Db } from '../db/schema.js';

/** The counters whose sum is the catalogue mark (docs/decisions.md, "Freshness"). */
const MARK_COUNTERS = ['catalogue_version', 'catalogue_published'];

/**
 * The catalogue mark: `catalogue_version` (bumped in every change's own transaction) plus
 * `catalogue_published` (bumped by a command once all its work, index.json files included,
 * is done). It only grows, and it moves whenever either does, so a serving process that has
 * emptied its caches at a mark has nothing cached from before that change.
 */
export async function readCatalogueMark(db: Db): Promise<number> {
  const row = await db
    .selectFrom('counter')
    .select((eb) => eb.fn.sum<string | number>('value').as('mark'))
    .where('name', 'in', MARK_COUNTERS)
    .executeTakeFirst();
  return Number(row?.mark ?? 0);
}

/** Bumps `catalogue_published` and answers the new mark (one transaction, so the two agree). */
export async function publishCatalogue(db: Db): Promise<number> {
  return db.transaction().execute(async (trx) => {
    await trx
      .updateTable('counter')
      .set({ value: sql`value + 1` })
      .where('name', '=', 'catalogue_published')
      .execute();
    return readCatalogueMark(trx);
  });
}
