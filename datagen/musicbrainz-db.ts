/*
 * A MusicBrainz mirror's database for the tests and the benchmark of the live catalogue (docs/mirror-database.md):
 * a PostgreSQL database of its own with the tables sleeve reads, in the column order and types
 * of musicbrainz-server's admin/sql/CreateTables.sql, admin/sql/caa/CreateTables.sql and
 * admin/sql/eaa/CreateTables.sql (keys and the foreign keys that cascade as there), loaded from a
 * dump folder by COPY, and dumped back into one the same way (what `sleeve import musicbrainz` reads).
 */
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';


export const MUSICBRAINZ_DDL = `
CREATE SCHEMA musicbrainz;
CREATE SCHEMA cover_art_archive;
SET search_path = musicbrainz;
CREATE TABLE release_group (
    id                  SERIAL,
    gid                 UUID NOT NULL,
    name                VARCHAR NOT NULL,
    artist_credit       INTEGER NOT NULL,
    type                INTEGER,
    comment             VARCHAR(255) NOT NULL DEFAULT '',
    edits_pending       INTEGER NOT NULL DEFAULT 0 CHECK (edits_pending >= 0),
    last_updated        TIMESTAMP WITH TIME ZONE DEFAULT NOW()
);
CREATE TABLE release (
    id                  SERIAL,
    gid                 UUID NOT NULL,
    name                VARCHAR NOT NULL,
    artist_credit       INTEGER NOT NULL,
    release_group       INTEGER NOT NULL,
    status              INTEGER,
    packaging           INTEGER,
    language            INTEGER,
    script              INTEGER,
    barcode             VARCHAR(255),
    comment             VARCHAR(255) NOT NULL DEFAULT '',
    edits_pending       INTEGER NOT NULL DEFAULT 0 CHECK (edits_pending >= 0),
    quality             SMALLINT NOT NULL DEFAULT -1,
    last_updated        TIMESTAMP WITH TIME ZONE DEFAULT NOW()
);
CREATE TABLE release_country (
  release INTEGER NOT NULL,
  country INTEGER NOT NULL,
  date_year SMALLINT,
  date_month SMALLINT,
  date_day SMALLINT
);
CREATE TABLE release_unknown_country (
  release INTEGER NOT NULL,
  date_year SMALLINT,
  date_month SMALLINT,
  date_day SMALLINT
);
CREATE TABLE release_gid_redirect (
    gid                 UUID NOT NULL,
    new_id              INTEGER NOT NULL,
    created             TIMESTAMP WITH TIME ZONE DEFAULT NOW()
);
CREATE TABLE release_group_gid_redirect (
    gid                 UUID NOT NULL,
    new_id              INTEGER NOT NULL,
    created             TIMESTAMP WITH TIME ZONE DEFAULT NOW()
);
CREATE TABLE edit (
    id                  SERIAL,
    editor              INTEGER NOT NULL,
    type                SMALLINT NOT NULL,
    status              SMALLINT NOT NULL,
    autoedit            SMALLINT NOT NULL DEFAULT 0,
    open_time            TIMESTAMP WITH TIME ZONE DEFAULT NOW(),
    close_time           TIMESTAMP WITH TIME ZONE,
    expire_time          TIMESTAMP WITH TIME ZONE NOT NULL,
    language            INTEGER,
    quality             SMALLINT NOT NULL DEFAULT 1
);
CREATE TABLE event (
    id                  SERIAL,
    gid                 UUID NOT NULL,
    name                VARCHAR NOT NULL,
    begin_date_year     SMALLINT,
    begin_date_month    SMALLINT,
    begin_date_day      SMALLINT,
    end_date_year       SMALLINT,
    end_date_month      SMALLINT,
    end_date_day        SMALLINT,
    time                TIME WITHOUT TIME ZONE,
    type                INTEGER,
    cancelled           BOOLEAN NOT NULL DEFAULT FALSE,
    setlist             TEXT,
    comment             VARCHAR(255) NOT NULL DEFAULT '',
    edits_pending       INTEGER NOT NULL DEFAULT 0 CHECK (edits_pending >= 0),
    last_updated        TIMESTAMP WITH TIME ZONE DEFAULT NOW(),
    ended               BOOLEAN NOT NULL DEFAULT FALSE
      CONSTRAINT event_ended_check CHECK (
        ((end_date_year IS NOT NULL OR end_date_month IS NOT NULL OR end_date_day IS NOT NULL) AND ended = TRUE)
        OR (end_date_year IS NULL AND end_date_month IS NULL AND end_date_day IS NULL)
      )
);
CREATE TABLE event_gid_redirect (
    gid                 UUID NOT NULL,
    new_id              INTEGER NOT NULL,
    created             TIMESTAMP WITH TIME ZONE DEFAULT NOW()
);
CREATE TABLE replication_control (
    id                              SERIAL,
    current_schema_sequence         INTEGER NOT NULL,
    current_replication_sequence    INTEGER,
    last_replication_date           TIMESTAMP WITH TIME ZONE
);
ALTER TABLE release_group ADD CONSTRAINT release_group_pkey PRIMARY KEY (id);
ALTER TABLE release ADD CONSTRAINT release_pkey PRIMARY KEY (id);
ALTER TABLE release_country ADD CONSTRAINT release_country_pkey PRIMARY KEY (release, country);
ALTER TABLE release_unknown_country ADD CONSTRAINT release_unknown_country_pkey PRIMARY KEY (release);
ALTER TABLE release_gid_redirect ADD CONSTRAINT release_gid_redirect_pkey PRIMARY KEY (gid);
ALTER TABLE release_group_gid_redirect ADD CONSTRAINT release_group_gid_redirect_pkey PRIMARY KEY (gid);
ALTER TABLE edit ADD CONSTRAINT edit_pkey PRIMARY KEY (id);
ALTER TABLE replication_control ADD CONSTRAINT replication_control_pkey PRIMARY KEY (id);
ALTER TABLE event ADD CONSTRAINT event_pkey PRIMARY KEY (id);
ALTER TABLE event_gid_redirect ADD CONSTRAINT event_gid_redirect_pkey PRIMARY KEY (gid);
CREATE UNIQUE INDEX release_idx_gid ON release (gid);
CREATE UNIQUE INDEX release_group_idx_gid ON release_group (gid);
CREATE INDEX release_idx_release_group ON release (release_group);
CREATE INDEX release_gid_redirect_idx_new_id ON release_gid_redirect (new_id);
CREATE INDEX release_group_gid_redirect_idx_new_id ON release_group_gid_redirect (new_id);
CREATE UNIQUE INDEX event_idx_gid ON event (gid);
CREATE INDEX event_gid_redirect_idx_new_id ON event_gid_redirect (new_id);
ALTER TABLE release ADD CONSTRAINT release_fk_release_group FOREIGN KEY (release_group) REFERENCES release_group(id);
ALTER TABLE release_country ADD CONSTRAINT release_country_fk_release FOREIGN KEY (release) REFERENCES release(id);
ALTER TABLE release_unknown_country ADD CONSTRAINT release_unknown_country_fk_release FOREIGN KEY (release) REFERENCES release(id);
ALTER TABLE release_gid_redirect ADD CONSTRAINT release_gid_redirect_fk_new_id FOREIGN KEY (new_id) REFERENCES release(id);
ALTER TABLE release_group_gid_redirect ADD CONSTRAINT release_group_gid_redirect_fk_new_id FOREIGN KEY (new_id) REFERENCES release_group(id);
ALTER TABLE event_gid_redirect ADD CONSTRAINT event_gid_redirect_fk_new_id FOREIGN KEY (new_id) REFERENCES event(id);
SET search_path = cover_art_archive;
CREATE TABLE art_type (
    id                  SERIAL NOT NULL,
    name                TEXT NOT NULL,
    parent              INTEGER,
    child_order         INTEGER NOT NULL DEFAULT 0,
    description         TEXT,
    gid                 uuid NOT NULL
);
CREATE TABLE image_type (
    mime_type TEXT NOT NULL,
    suffix TEXT NOT NULL
);
CREATE TABLE cover_art (
    id BIGINT NOT NULL,
    release INTEGER NOT NULL,
    comment TEXT NOT NULL DEFAULT '',
    edit INTEGER NOT NULL,
    ordering INTEGER NOT NULL CHECK (ordering > 0),
    date_uploaded TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL,
    edits_pending INTEGER NOT NULL DEFAULT 0 CHECK (edits_pending >= 0),
    mime_type TEXT NOT NULL,
    filesize INTEGER,
    thumb_250_filesize INTEGER,
    thumb_500_filesize INTEGER,
    thumb_1200_filesize INTEGER
);
CREATE TABLE cover_art_type (
    id BIGINT NOT NULL,
    type_id INTEGER NOT NULL
);
CREATE TABLE release_group_cover_art (
    release_group       INTEGER NOT NULL,
    release             INTEGER NOT NULL
);
ALTER TABLE art_type ADD CONSTRAINT art_type_pkey PRIMARY KEY (id);
ALTER TABLE image_type ADD CONSTRAINT image_type_pkey PRIMARY KEY (mime_type);
ALTER TABLE cover_art ADD CONSTRAINT cover_art_pkey PRIMARY KEY (id);
ALTER TABLE cover_art_type ADD CONSTRAINT cover_art_type_pkey PRIMARY KEY (id, type_id);
ALTER TABLE release_group_cover_art ADD CONSTRAINT release_group_cover_art_pkey PRIMARY KEY (release_group);
CREATE INDEX cover_art_idx_release ON cover_art (release);
ALTER TABLE cover_art ADD CONSTRAINT cover_art_fk_release FOREIGN KEY (release) REFERENCES musicbrainz.release(id) ON DELETE CASCADE;
ALTER TABLE cover_art_type ADD CONSTRAINT cover_art_type_fk_id FOREIGN KEY (id) REFERENCES cover_art(id) ON DELETE CASCADE;
ALTER TABLE cover_art_type ADD CONSTRAINT cover_art_type_fk_type_id FOREIGN KEY (type_id) REFERENCES art_type(id);
ALTER TABLE release_group_cover_art ADD CONSTRAINT release_group_cover_art_fk_release_group FOREIGN KEY (release_group) REFERENCES musicbrainz.release_group(id);
ALTER TABLE release_group_cover_art ADD CONSTRAINT release_group_cover_art_fk_release FOREIGN KEY (release) REFERENCES musicbrainz.release(id);
RESET search_path;
`;

/**
 * The Event Art Archive's schema (admin/sql/eaa/CreateTables.sql, its keys, indexes and
 * cascading foreign keys; event_art's mime type, like cover_art's above, without its foreign
 * key to cover_art_archive.image_type, so a test can give one the mirror does not list).
 */
export const EVENT_ART_ARCHIVE_DDL = `
CREATE SCHEMA event_art_archive;
SET search_path = event_art_archive;
CREATE TABLE art_type (
    id                  SERIAL NOT NULL,
    name                TEXT NOT NULL,
    parent              INTEGER,
    child_order         INTEGER NOT NULL DEFAULT 0,
    description         TEXT,
    gid                 uuid NOT NULL
);
CREATE TABLE event_art (
    id BIGINT NOT NULL,
    event INTEGER NOT NULL,
    comment TEXT NOT NULL DEFAULT '',
    edit INTEGER NOT NULL,
    ordering INTEGER NOT NULL CHECK (ordering > 0),
    date_uploaded TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL,
    edits_pending INTEGER NOT NULL DEFAULT 0 CHECK (edits_pending >= 0),
    mime_type TEXT NOT NULL,
    filesize INTEGER,
    thumb_250_filesize INTEGER,
    thumb_500_filesize INTEGER,
    thumb_1200_filesize INTEGER
);
CREATE TABLE event_art_type (
    id BIGINT NOT NULL,
    type_id INTEGER NOT NULL
);
ALTER TABLE art_type ADD CONSTRAINT art_type_pkey PRIMARY KEY (id);
ALTER TABLE event_art ADD CONSTRAINT event_art_pkey PRIMARY KEY (id);
ALTER TABLE event_art_type ADD CONSTRAINT event_art_type_pkey PRIMARY KEY (id, type_id);
CREATE INDEX event_art_idx_event ON event_art (event);
CREATE UNIQUE INDEX art_type_idx_gid ON art_type (gid);
ALTER TABLE art_type ADD CONSTRAINT art_type_fk_parent FOREIGN KEY (parent) REFERENCES event_art_archive.art_type(id);
ALTER TABLE event_art ADD CONSTRAINT event_art_fk_event FOREIGN KEY (event) REFERENCES musicbrainz.event(id) ON DELETE CASCADE;
ALTER TABLE event_art_type ADD CONSTRAINT event_art_type_fk_id FOREIGN KEY (id) REFERENCES event_art(id) ON DELETE CASCADE;
ALTER TABLE event_art_type ADD CONSTRAINT event_art_type_fk_type_id FOREIGN KEY (type_id) REFERENCES art_type(id);
RESET search_path;
`;

/** The dump files and the tables they are (loaded in this order: referenced tables first). */
export const MIRROR_FILES: [file: string, table: string][] = [
  ['cover_art_archive.art_type', 'cover_art_archive.art_type'],
  ['cover_art_archive.image_type', 'cover_art_archive.image_type'],
  ['release_group', 'musicbrainz.release_group'],
  ['release', 'musicbrainz.release'],
  ['release_country', 'musicbrainz.release_country'],
  ['release_unknown_country', 'musicbrainz.release_unknown_country'],
  ['release_gid_redirect', 'musicbrainz.release_gid_redirect'],
  ['release_group_gid_redirect', 'musicbrainz.release_group_gid_redirect'],
  ['edit', 'musicbrainz.edit'],
  ['cover_art_archive.cover_art', 'cover_art_archive.cover_art'],
  ['cover_art_archive.cover_art_type', 'cover_art_archive.cover_art_type'],
  ['cover_art_archive.release_group_cover_art', 'cover_art_archive.release_group_cover_art'],
  ['event', 'musicbrainz.event'],
  ['event_gid_redirect', 'musicbrainz.event_gid_redirect'],
  ['event_art_archive.art_type', 'event_art_archive.art_type'],
  ['event_art_archive.event_art', 'event_art_archive.event_art'],
  ['event_art_archive.event_art_type', 'event_art_archive.event_art_type'],
];

/** The files of the Event Art Archive's schema (left out with it). */
const EVENT_ART_ARCHIVE_FILES = new Set(['event_art_archive.art_type', 'event_art_archive.event_art', 'event_art_archive.event_art_type']);

export interface MirrorDb {
  name: string;
  url: string;
  /** Runs statements in one transaction (as a replication packet applies them), as a superuser. */
  apply(...statements: string[]): Promise<void>;
  /** A connection of its own (for a transaction left open). */
  connect(): Promise<pg.Client>;
  /** Writes the mirror's tables as dump files (mbdump/ and the meta files) into `dir`. */
  dumpTo(dir: string): Promise<string>;
  drop(): Promise<void>;
}

function urlOf(admin: string, name: string): string {
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.href;
}

/** A name for a mirror database not made yet (createMirror makes it). */
export function mirrorName(): string {
  return `sleeve_test_mb_${randomBytes(6).toString('hex')}`;
}

export function mirrorUrl(admin: string, name: string): string {
  return urlOf(admin, name);
}

export interface MirrorOptions {
  /** Whether the Event Art Archive's schema is made (default true; a mirror set up without it has none). */
  eventArtArchive?: boolean;
}

/**
 * Creates the mirror's database on the server `adminUrl` names (a superuser's URL) with the
 * MusicBrainz tables and, from `dumpDir` (a dump folder), their rows.
 */

export async function createMirror(adminUrl: string, dumpDir: string | undefined, name = mirrorName(), options: MirrorOptions = {}): Promise<MirrorDb> {
  const withEvents = options.eventArtArchive !== false;
  const files = MIRROR_FILES.filter(([file]) => withEvents || !EVENT_ART_ARCHIVE_FILES.has(file));
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = urlOf(adminUrl, name);
  const connect = async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    return c;
  };
  const c = await connect();
  try {
    await c.query(MUSICBRAINZ_DDL);
    if (withEvents) await c.query(EVENT_ART_ARCHIVE_DDL);
    if (dumpDir !== undefined) {
      await c.query('BEGIN');
      for (const [file, table] of files) {
        const source = path.join(dumpDir, 'mbdump', file);
        // A file the dump lacks (edit, the event art archive's) leaves its table empty: no COPY is begun for it.
        if (!existsSync(source)) continue;
        await pipeline(createReadStream(source), c.query(copyFrom(`COPY ${table} FROM STDIN`)));
      }
      await c.query('COMMIT');
    }
  } finally {
    await c.end();
  }
  return {
    name,
    url,
    connect,
    async apply(...statements) {
      const client = await connect();
      try {
        await client.query('BEGIN');
        for (const s of statements) await client.query(s);
        await client.query('COMMIT');
      } finally {
        await client.end();
      }
    },
    async dumpTo(dir) {
      await mkdir(path.join(dir, 'mbdump'), { recursive: true });
      const client = await connect();
      try {
        for (const [file, table] of MIRROR_FILES) {
          // The Event Art Archive's tables as the mirror has them now (made later, or not at all).
          const [there] = (await client.query<{ ok: boolean }>('SELECT to_regclass($1) IS NOT NULL AS ok', [table])).rows;
          if (there?.ok !== true) continue;
          await pipeline(client.query(copyTo(`COPY ${table} TO STDOUT`)), createWriteStream(path.join(dir, 'mbdump', file)));
        }
      } finally {
        await client.end();
      }
      await writeFile(path.join(dir, 'TIMESTAMP'), '2026-12-07 00:00:00.000000+00\n');
      await writeFile(path.join(dir, 'REPLICATION_SEQUENCE'), '170001\n');
      await writeFile(path.join(dir, 'SCHEMA_SEQUENCE'), '30\n');
      return dir;
    },
    async drop() {
      const a = new pg.Client({ connectionString: adminUrl });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}
