import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * What sleeve measured of an image's stored files, for the listings' additive fields
 * (docs/interface.md, "Image entry"; docs/decisions.md, "Listings that describe the images"):
 * the original's width and height as displayed (after EXIF orientation), its size in bytes as
 * stored, and the thumbnails' dimensions as JSON (`{"250": {"width": w, "height": h}, …}`).
 * All null until sleeve has the file (an imported image it never fetched): unknown, not guessed.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('cover_art').addColumn('width', 'integer').execute();
  await db.schema.alterTable('cover_art').addColumn('height', 'integer').execute();
  await db.schema.alterTable('cover_art').addColumn('stored_size', 'bigint').execute();
  await db.schema.alterTable('cover_art').addColumn('thumbnail_dimensions', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const column of ['thumbnail_dimensions', 'stored_size', 'height', 'width']) {
    await db.schema.alterTable('cover_art').dropColumn(column).execute();
  }
}
