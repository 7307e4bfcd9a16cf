import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * Counter rows that the catalogue's changes keep up to date in their own transactions and
 * serving processes expose as metrics (the CLI processes that make the changes are never
 * scraped): uploads, uploaded bytes and removals since this migration, and the numbers of
 * releases and images, counted once here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  const count = async (table: string): Promise<number> => {
    const row = await db.selectFrom(table).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  };
  await db
    .insertInto('counter')
    .values([
      { name: 'uploads_total', value: 0 },
      { name: 'upload_bytes_total', value: 0 },
      { name: 'image_removals_total', value: 0 },
      { name: 'releases', value: await count('release') },
      { name: 'images', value: await count('cover_art') },
    ])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.deleteFrom('counter').where('name', 'in', ['uploads_total', 'upload_bytes_total', 'image_removals_total', 'releases', 'images']).execute();
}
