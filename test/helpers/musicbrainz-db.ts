/*
 * A MusicBrainz mirror's database for the tests (datagen/musicbrainz-db.ts), on the test
 * PostgreSQL server (SLEEVE_TEST_POSTGRES_URL, or 127.0.0.1:5432 as postgres: the mirror needs
 * PostgreSQL even in the SQLite pass).
 */
import * as db from '../../datagen/musicbrainz-db.js';

export const ADMIN = process.env.SLEEVE_TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
export type MirrorDb = db.MirrorDb;
export const mirrorName = db.mirrorName;
export const EVENT_ART_ARCHIVE_DDL = db.EVENT_ART_ARCHIVE_DDL;

export function mirrorUrl(name: string): string {
  return db.mirrorUrl(ADMIN, name);
}

export function createMirror(dumpDir: string | undefined, name?: string, options?: db.MirrorOptions): Promise<MirrorDb> {
  return db.createMirror(ADMIN, dumpDir, name, options);
}
