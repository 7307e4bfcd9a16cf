/*
 * The MusicBrainz dump files the import reads, with the column order of the real
 * schema (musicbrainz-server admin/sql/CreateTables.sql and admin/sql/caa/CreateTables.sql,
 * the cover_art filesize columns appended by the 2019 schema change; admin/sql/eaa/CreateTables.sql
 * for the Event Art Archive's), and which of them sleeve keeps.
 */
import type { Column, ColumnType } from './copy-text.js';

export interface DumpTable {
  /** The file under mbdump/ (and the table's name in the dump). */
  file: string;
  /** A short name for messages, progress and staging tables. */
  name: string;
  columns: readonly Column[];
  /** The columns kept in staging where values are converted (SQLite); all of them on PostgreSQL. */
  keep: readonly string[];
  /** False for files a dump may lack. */
  required: boolean;
  /** The tarball that holds the file, for the "missing file" message. */
  tarball: string;
  /** Only rows whose first column is an edit some staged image names are staged (the edit table is huge). */
  onlyCoverArtEdits?: boolean;
  /**
   * The Event Art Archive's tables: read only when the dump has mbdump/event_art_archive.event_art
   * (mbdump-event-art-archive.tar.bz2 extracted), and then all required (`required` is false).
   */
  events?: true;
}

function col(name: string, type: ColumnType, nullable = false, check?: Column['check']): Column {
  return check === undefined ? { name, type, nullable } : { name, type, nullable, check };
}

const MAIN = 'mbdump.tar.bz2';
const CAA = 'mbdump-cover-art-archive.tar.bz2';
const EAA = 'mbdump-event-art-archive.tar.bz2';

/** The file whose presence says the dump has the Event Art Archive's tables. */
export const EVENT_ART_FILE = 'event_art_archive.event_art';

/** In the order they are staged: the edit table last, since it is filtered by the staged images (cover art and event art). */
export const DUMP_TABLES: readonly DumpTable[] = [
  {
    file: 'cover_art_archive.art_type',
    name: 'art_type',
    columns: [col('id', 'int'), col('name', 'text'), col('parent', 'int', true), col('child_order', 'int'), col('description', 'text', true), col('gid', 'uuid')],
    keep: ['id', 'name', 'parent', 'child_order', 'description', 'gid'],
    required: true,
    tarball: CAA,
  },
  {
    file: 'cover_art_archive.image_type',
    name: 'image_type',
    columns: [col('mime_type', 'text', false, 'mime-type'), col('suffix', 'text', false, 'suffix')],
    keep: ['mime_type', 'suffix'],
    required: true,
    tarball: CAA,
  },
  {
    file: 'release_group',
    name: 'release_group',
    columns: [
      col('id', 'int'),
      col('gid', 'uuid'),
      col('name', 'text'),
      col('artist_credit', 'int'),
      col('type', 'int', true),
      col('comment', 'text'),
      col('edits_pending', 'int', false, 'non-negative'),
      col('last_updated', 'timestamptz', true),
    ],
    keep: ['id', 'gid', 'name'],
    required: true,
    tarball: MAIN,
  },
  {
    file: 'release',
    name: 'release',
    columns: [
      col('id', 'int'),
      col('gid', 'uuid'),
      col('name', 'text'),
      col('artist_credit', 'int'),
      col('release_group', 'int'),
      col('status', 'int', true),
      col('packaging', 'int', true),
      col('language', 'int', true),
      col('script', 'int', true),
      col('barcode', 'text', true),
      col('comment', 'text'),
      col('edits_pending', 'int', false, 'non-negative'),
      col('quality', 'smallint'),
      col('last_updated', 'timestamptz', true),
    ],
    keep: ['id', 'gid', 'name', 'release_group'],
    required: true,
    tarball: MAIN,
  },
  {
    file: 'release_country',
    name: 'release_country',
    columns: [col('release', 'int'), col('country', 'int'), col('date_year', 'smallint', true), col('date_month', 'smallint', true), col('date_day', 'smallint', true)],
    keep: ['release', 'date_year', 'date_month', 'date_day'],
    required: true,
    tarball: MAIN,
  },
  {
    file: 'release_unknown_country',
    name: 'release_unknown_country',
    columns: [col('release', 'int'), col('date_year', 'smallint', true), col('date_month', 'smallint', true), col('date_day', 'smallint', true)],
    keep: ['release', 'date_year', 'date_month', 'date_day'],
    required: true,
    tarball: MAIN,
  },
  {
    file: 'release_gid_redirect',
    name: 'release_gid_redirect',
    columns: [col('gid', 'uuid'), col('new_id', 'int'), col('created', 'timestamptz', true)],
    keep: ['gid', 'new_id'],
    required: true,
    tarball: MAIN,
  },
  {
    file: 'release_group_gid_redirect',
    name: 'release_group_gid_redirect',
    columns: [col('gid', 'uuid'), col('new_id', 'int'), col('created', 'timestamptz', true)],
    keep: ['gid', 'new_id'],
    required: true,
    tarball: MAIN,
  },
  {
    file: 'cover_art_archive.cover_art',
    name: 'cover_art',
    columns: [
      col('id', 'bigint'),
      col('release', 'int'),
      col('comment', 'text'),
      col('edit', 'int'),
      col('ordering', 'int', false, 'positive'),
      col('date_uploaded', 'timestamptz'),
      col('edits_pending', 'int', false, 'non-negative'),
      col('mime_type', 'text', false, 'mime-type'),
      col('filesize', 'int', true),
      col('thumb_250_filesize', 'int', true),
      col('thumb_500_filesize', 'int', true),
      col('thumb_1200_filesize', 'int', true),
    ],
    keep: ['id', 'release', 'comment', 'edit', 'ordering', 'date_uploaded', 'edits_pending', 'mime_type', 'filesize', 'thumb_250_filesize', 'thumb_500_filesize', 'thumb_1200_filesize'],
    required: true,
    tarball: CAA,
  },
  {
    file: 'cover_art_archive.cover_art_type',
    name: 'cover_art_type',
    columns: [col('id', 'bigint'), col('type_id', 'int')],
    keep: ['id', 'type_id'],
    required: true,
    tarball: CAA,
  },
  {
    file: 'cover_art_archive.release_group_cover_art',
    name: 'release_group_cover_art',
    columns: [col('release_group', 'int'), col('release', 'int')],
    keep: ['release_group', 'release'],
    required: true,
    tarball: CAA,
  },
  {
    file: 'event_art_archive.art_type',
    name: 'event_art_kind',
    columns: [col('id', 'int'), col('name', 'text'), col('parent', 'int', true), col('child_order', 'int'), col('description', 'text', true), col('gid', 'uuid')],
    keep: ['id', 'name', 'parent', 'child_order', 'description', 'gid'],
    required: false,
    tarball: EAA,
    events: true,
  },
  {
    file: 'event',
    name: 'event',
    columns: [
      col('id', 'int'),
      col('gid', 'uuid'),
      col('name', 'text'),
      col('begin_date_year', 'smallint', true),
      col('begin_date_month', 'smallint', true),
      col('begin_date_day', 'smallint', true),
      col('end_date_year', 'smallint', true),
      col('end_date_month', 'smallint', true),
      col('end_date_day', 'smallint', true),
      // TIME WITHOUT TIME ZONE and the booleans (t/f): not kept, read as text.
      col('time', 'text', true),
      col('type', 'int', true),
      col('cancelled', 'text'),
      col('setlist', 'text', true),
      col('comment', 'text'),
      col('edits_pending', 'int', false, 'non-negative'),
      col('last_updated', 'timestamptz', true),
      col('ended', 'text'),
    ],
    keep: ['id', 'gid', 'name'],
    required: false,
    tarball: MAIN,
    events: true,
  },
  {
    file: 'event_gid_redirect',
    name: 'event_gid_redirect',
    columns: [col('gid', 'uuid'), col('new_id', 'int'), col('created', 'timestamptz', true)],
    keep: ['gid', 'new_id'],
    required: false,
    tarball: MAIN,
    events: true,
  },
  {
    file: EVENT_ART_FILE,
    name: 'event_art',
    columns: [
      col('id', 'bigint'),
      col('event', 'int'),
      col('comment', 'text'),
      col('edit', 'int'),
      col('ordering', 'int', false, 'positive'),
      col('date_uploaded', 'timestamptz'),
      col('edits_pending', 'int', false, 'non-negative'),
      col('mime_type', 'text', false, 'mime-type'),
      col('filesize', 'int', true),
      col('thumb_250_filesize', 'int', true),
      col('thumb_500_filesize', 'int', true),
      col('thumb_1200_filesize', 'int', true),
    ],
    keep: ['id', 'event', 'comment', 'edit', 'ordering', 'date_uploaded', 'edits_pending', 'mime_type', 'filesize', 'thumb_250_filesize', 'thumb_500_filesize', 'thumb_1200_filesize'],
    required: false,
    tarball: EAA,
    events: true,
  },
  {
    file: 'event_art_archive.event_art_type',
    name: 'event_art_type',
    columns: [col('id', 'bigint'), col('type_id', 'int')],
    keep: ['id', 'type_id'],
    required: false,
    tarball: EAA,
    events: true,
  },
  {
    file: 'edit',
    name: 'edit',
    columns: [
      col('id', 'int'),
      col('editor', 'int'),
      col('type', 'smallint'),
      col('status', 'smallint'),
      col('autoedit', 'smallint'),
      col('open_time', 'timestamptz', true),
      col('close_time', 'timestamptz', true),
      col('expire_time', 'timestamptz'),
      col('language', 'int', true),
      col('quality', 'smallint'),
    ],
    keep: ['id', 'close_time'],
    required: false,
    tarball: 'mbdump-edit.tar.bz2',
    onlyCoverArtEdits: true,
  },
];

/** Files of a dump that describe the dump itself (read when present). */
export const DUMP_META_FILES = ['TIMESTAMP', 'REPLICATION_SEQUENCE', 'SCHEMA_SEQUENCE'] as const;

/** The SQL type of a column in a staging table (PostgreSQL; SQLite takes them as affinities). */
function sqlType(type: ColumnType): string {
  switch (type) {
    case 'int':
      return 'integer';
    case 'smallint':
      return 'smallint';
    case 'bigint':
      return 'bigint';
    case 'uuid':
      return 'uuid';
    case 'text':
      return 'text';
    case 'timestamptz':
      return 'timestamptz';
  }
}

/** Indexes of the kept columns in a parsed row. */
export function keptIndexes(table: DumpTable): number[] {
  return table.keep.map((name) => {
    const i = table.columns.findIndex((c) => c.name === name);
    if (i === -1) throw new Error(`${table.name}: kept column ${name} is not a column`);
    return i;
  });
}

/** The column definitions of a staging table: the kept columns, timestamps as epoch milliseconds in `stampType`. */
export function stagingColumns(table: DumpTable, stampType: string): string[] {
  return keptIndexes(table).map((i) => {
    const c = table.columns[i] as (typeof table.columns)[number];
    return `${c.name} ${c.type === 'timestamptz' ? stampType : sqlType(c.type)}`;
  });
}
