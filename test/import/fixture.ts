/*
 * A small hand-made MusicBrainz dump whose every row is known, for the import tests:
 * escapes in values (tabs, newlines, backslashes, octal and hex bytes), merged MBIDs,
 * several release events per release, art types, pending edits, an editor-chosen
 * release, a Raw/Unedited front, a PDF front.
 */
import { writeDump, raw, type DumpMeta, type Value } from '../../datagen/mbdump.js';

export const G = {
  one: '1b3bd7b8-6a7c-4c2c-9d5c-000000000001',
  two: '1b3bd7b8-6a7c-4c2c-9d5c-000000000002',
  three: '1b3bd7b8-6a7c-4c2c-9d5c-000000000003',
  /** Merged into `two`. */
  oldTwo: '1b3bd7b8-6a7c-4c2c-9d5c-0000000000f2',
};

export const R = {
  /** Group one: the front to show (2000, approved front, pending back). */
  one: 'a0a0a0a0-1111-4111-8111-000000000001',
  /** Group one: earlier (1990) but its front is Raw/Unedited. */
  two: 'a0a0a0a0-1111-4111-8111-000000000002',
  /** Group one: earliest (1980), back only. */
  three: 'a0a0a0a0-1111-4111-8111-000000000003',
  /** Group two: 1999. */
  four: 'a0a0a0a0-1111-4111-8111-000000000004',
  /** Group two: 2005, the editor's choice; its front is a PDF. */
  five: 'a0a0a0a0-1111-4111-8111-000000000005',
  /** Group three: events 2003-02-01 and 2001 (country) and 2001-06 (unknown country). */
  six: 'a0a0a0a0-1111-4111-8111-000000000006',
  /** Group three: 2001-07-01. */
  seven: 'a0a0a0a0-1111-4111-8111-000000000007',
  /** Merged into `one`. */
  oldOne: 'a0a0a0a0-1111-4111-8111-0000000000f1',
};

/** The comment of image 1001 as written in the file (escaped) and as it must come out. */
export const COMMENT_RAW = 'front \\"cover\\"\\twith tab\\nnew line \\\\ backslash \\303\\251t\\xc3\\xA9 \\x41';
export const COMMENT = 'front "cover"\twith tab\nnew line \\ backslash \u00e9t\u00e9 A';

const TS = '2012-01-26 00:54:05.519372+00';

function release(id: number, gid: string, name: Value, group: number, edits = 0): Value[] {
  return [id, gid, name, 1, group, 1, null, 120, 28, null, '', edits, -1, TS];
}

function image(id: number, releaseId: number, comment: Value, edit: number, ordering: number, mime: string, editsPending = 0): Value[] {
  return [id, releaseId, comment, edit, ordering, TS, editsPending, mime, 123456, 2000, 5000, 15000];
}

export interface FixtureOptions {
  /** Write mbdump/edit (default true). */
  edits?: boolean;
  /** Write the Event Art Archive's files (eventTables) and their add-edits (default false). */
  events?: boolean;
  meta?: DumpMeta;
  /** Change rows before writing (bad-input and re-import tests). */
  edit?: (tables: Record<string, Value[][]>) => void;
}

export const IMAGES = {
  r1Front: 1001,
  r1Back: 1002,
  r1SecondFront: 1003,
  r2RawFront: 2001,
  r3Back: 3001,
  r4Front: 4001,
  r5PdfFront: 5001,
  r6Front: 6001,
  r7Front: 7001,
};

export function fixtureTables(): Record<string, Value[][]> {
  return {
    release_group: [
      [1, G.one, 'Group One', 1, 1, '', 0, TS],
      [2, G.two, raw('Group \\\\ Two\\tTabbed'), 1, 1, 'a comment', 1, null],
      [3, G.three, 'Group Three', 1, null, '', 0, TS],
    ],
    release: [
      release(1, R.one, raw('One\\twith\\ttabs and \\\\ and \\n'), 1),
      release(2, R.two, 'Two', 1),
      release(3, R.three, 'Three', 1),
      release(4, R.four, 'Four', 2),
      release(5, R.five, 'Five', 2, 1),
      release(6, R.six, 'Six — Ünïcode', 3),
      release(7, R.seven, 'Seven', 3),
    ],
    release_country: [
      [1, 221, 2000, 5, null],
      [2, 221, 1990, null, null],
      [3, 81, 1980, 1, 1],
      [4, 221, 1999, 12, 31],
      [6, 221, 2003, 2, 1],
      [6, 81, 2001, null, null],
    ],
    release_unknown_country: [
      [5, 2005, null, null],
      [6, 2001, 6, null],
    ],
    release_gid_redirect: [[R.oldOne, 1, TS]],
    release_group_gid_redirect: [[G.oldTwo, 2, null]],
    'cover_art_archive.cover_art': [
      image(IMAGES.r1Front, 1, raw(COMMENT_RAW), 501, 1, 'image/jpeg'),
      image(IMAGES.r1Back, 1, '', 502, 2, 'image/png', 1),
      image(IMAGES.r1SecondFront, 1, 'second front', 501, 3, 'image/jpeg'),
      image(IMAGES.r2RawFront, 2, '', 504, 1, 'image/jpeg'),
      image(IMAGES.r3Back, 3, '', 505, 1, 'image/jpeg'),
      image(IMAGES.r4Front, 4, '', 506, 1, 'image/jpeg'),
      // Its add-edit is not in the edit table: not approved (the view's LEFT JOIN).
      image(IMAGES.r5PdfFront, 5, '', 503, 1, 'application/pdf'),
      image(IMAGES.r6Front, 6, '', 507, 1, 'image/jpeg'),
      image(IMAGES.r7Front, 7, '', 508, 1, 'image/gif'),
    ],
    'cover_art_archive.cover_art_type': [
      [IMAGES.r1Front, 1],
      [IMAGES.r1Back, 2],
      [IMAGES.r1Back, 3],
      [IMAGES.r1SecondFront, 1],
      [IMAGES.r2RawFront, 1],
      [IMAGES.r2RawFront, 14],
      [IMAGES.r3Back, 2],
      [IMAGES.r4Front, 1],
      [IMAGES.r5PdfFront, 1],
      [IMAGES.r6Front, 1],
      [IMAGES.r7Front, 1],
    ],
    'cover_art_archive.release_group_cover_art': [[2, 5]],
    edit: [
      // id, editor, type, status, autoedit, open_time, close_time, expire_time, language, quality
      [501, 7, 314, 2, 0, TS, TS, TS, null, 1],
      [502, 7, 314, 1, 0, TS, null, TS, null, 1],
      [504, 7, 314, 2, 1, TS, TS, TS, null, 1],
      [505, 7, 314, 2, 0, TS, '2012-02-02 10:00:00+02', TS, null, 1],
      [506, 7, 314, 2, 0, TS, '2013-03-03 03:03:03.1+00:30', TS, null, 1],
      [507, 7, 314, 2, 0, TS, TS, TS, 120, 1],
      [508, 7, 314, 2, 0, TS, TS, TS, null, 1],
      // Edits of other things: read, not kept.
      [9001, 8, 1, 2, 0, TS, TS, TS, null, 1],
    ],
  };
}

/** Events of the event art archive's tables (eventTables). */
export const E = {
  /** Three images: untyped, the Poster (a PNG), a second Poster whose add-edit is open. */
  one: 'e1e1e1e1-2222-4333-8444-000000000001',
  /** A PDF typed Poster first (never the front, as the index_listing view says), then a JPEG Poster. */
  two: 'e1e1e1e1-2222-4333-8444-000000000002',
  /** No images. */
  three: 'e1e1e1e1-2222-4333-8444-000000000003',
  /** Merged into `one`. */
  oldOne: 'e1e1e1e1-2222-4333-8444-0000000000f1',
};

export const EVENT_IMAGES = { e1Stage: 8001, e1Poster: 8002, e1Pending: 8003, e2Pdf: 8100, e2Poster: 8101 };

function event(id: number, gid: string, name: Value): Value[] {
  // id, gid, name, begin y/m/d, end y/m/d, time, type, cancelled, setlist, comment, edits_pending, last_updated, ended
  return [id, gid, name, 2019, 6, 1, 2019, 6, 2, '20:00:00', 1, 'f', raw('* one\\n* two'), '', 0, TS, 't'];
}

export function eventTables(): Record<string, Value[][]> {
  const art = (id: number, eventId: number, comment: Value, edit: number, ordering: number, mime: string): Value[] => [id, eventId, comment, edit, ordering, TS, 0, mime, 4321, 1000, 2000, null];
  return {
    event: [event(1, E.one, raw('Night\\tOne')), event(2, E.two, 'Two — Ünïcode'), event(3, E.three, 'Three')],
    event_gid_redirect: [[E.oldOne, 1, TS]],
    'event_art_archive.event_art': [
      art(EVENT_IMAGES.e1Stage, 1, 'the stage', 601, 1, 'image/jpeg'),
      art(EVENT_IMAGES.e1Poster, 1, '', 602, 2, 'image/png'),
      art(EVENT_IMAGES.e1Pending, 1, 'pending', 603, 3, 'image/jpeg'),
      art(EVENT_IMAGES.e2Pdf, 2, 'programme', 606, 1, 'application/pdf'),
      art(EVENT_IMAGES.e2Poster, 2, '', 604, 2, 'image/jpeg'),
    ],
    'event_art_archive.event_art_type': [
      [EVENT_IMAGES.e1Poster, 1],
      [EVENT_IMAGES.e1Pending, 1],
      [EVENT_IMAGES.e2Pdf, 1],
      [EVENT_IMAGES.e2Poster, 1],
    ],
    edit: [
      [601, 7, 158, 2, 0, TS, TS, TS, null, 1],
      [602, 7, 158, 2, 1, TS, TS, TS, null, 1],
      [603, 7, 158, 1, 0, TS, null, TS, null, 1],
      [604, 7, 158, 2, 0, TS, TS, TS, null, 1],
      [606, 7, 158, 2, 0, TS, TS, TS, null, 1],
    ],
  };
}

/** Writes the fixture dump into `dir` (mbdump/ and the meta files); returns `dir`. */
export async function writeFixture(dir: string, options: FixtureOptions = {}): Promise<string> {
  const tables = fixtureTables();
  if (options.events === true) {
    const events = eventTables();
    tables.edit = [...(tables.edit ?? []), ...(events.edit ?? [])];
    delete events.edit;
    Object.assign(tables, events);
  }
  if (options.edits === false) delete tables.edit;
  options.edit?.(tables);
  return writeDump(dir, tables, options.meta);
}
