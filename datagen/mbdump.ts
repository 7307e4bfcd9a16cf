/*
 * MusicBrainz dumps for the import tests and the import benchmark (both import this folder,
 * neither imports the other), in the real format:
 * an mbdump/ folder of PostgreSQL COPY text files (tab separated, `\N` for NULL,
 * backslash escapes) with the real column orders, plus TIMESTAMP and the sequence files.
 * Written independently of src/import (its own escaping and column lists).
 */
import { createWriteStream } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { once } from 'node:events';
import { mulberry32 } from './prng.js';

/** A field written as given: already in COPY text form (for octal and hex escapes). */
export interface RawField {
  raw: string;
}

export type Value = string | number | null | RawField;

export function raw(text: string): RawField {
  return { raw: text };
}

/** Column counts of the real tables, to catch a test writing the wrong shape by mistake. */
export const COLUMNS: Record<string, number> = {
  release: 14,
  release_group: 8,
  release_gid_redirect: 3,
  release_group_gid_redirect: 3,
  release_country: 5,
  release_unknown_country: 4,
  'cover_art_archive.cover_art': 12,
  'cover_art_archive.cover_art_type': 2,
  'cover_art_archive.art_type': 6,
  'cover_art_archive.image_type': 2,
  'cover_art_archive.release_group_cover_art': 2,
  edit: 10,
};

/** The Event Art Archive's files (written only when a test gives one of them: a dump may lack them). */
export const EVENT_COLUMNS: Record<string, number> = {
  'event_art_archive.art_type': 6,
  event: 17,
  event_gid_redirect: 3,
  'event_art_archive.event_art': 12,
  'event_art_archive.event_art_type': 2,
};

const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r', '\b': '\\b', '\f': '\\f', '\v': '\\v' };

/** A value as PostgreSQL's COPY TO writes it in text format. */
export function copyValue(v: Value): string {
  if (v === null) return '\\N';
  if (typeof v === 'object') return v.raw;
  return String(v).replace(/[\\\t\n\r\b\f\v]/g, (c) => ESCAPES[c] as string);
}

export function copyLine(values: Value[]): string {
  return `${values.map(copyValue).join('\t')}\n`;
}

/** The Cover Art Archive's art types (MusicBrainz's `cover_art_archive.art_type` rows: id, name, parent, child_order, description, gid) as the dump has them. */
export const ART_TYPES: Value[][] = [
  [1, 'Front', null, 0, 'The album cover.', 'ac337166-a2b3-340c-a0b4-e2b00f1d40a2'],
  [2, 'Back', null, 0, 'The back of the package.', '263c3668-723c-3afe-86ef-c3236324250a'],
  [3, 'Booklet', null, 0, 'A small book.', 'b7d0e4ca-564e-3255-a422-9a605b099458'],
  [4, 'Medium', null, 0, 'The medium.', '43d5e353-1bfc-39c4-ab07-5dddaf98433d'],
  [5, 'Obi', null, 0, null, 'fc22aa61-f533-3ea3-820c-17ca8fdcca4d'],
  [6, 'Spine', null, 0, null, 'e7dfa72b-c614-32f8-a931-00bb6c4bc625'],
  [7, 'Track', null, 0, null, '6a57878d-3e5a-3895-87a5-493674b4d94b'],
  [8, 'Other', null, 1, 'Anything else.', '2eae8c63-bf22-379d-9473-ad62c2a21af2'],
  [9, 'Tray', null, 0, null, 'de761f9e-9d2c-32c3-b2cd-fc18168f9c81'],
  [10, 'Sticker', null, 0, null, 'c3ebec6c-f2cf-315e-bb7c-6d1d2d1ef1df'],
  [11, 'Poster', null, 0, null, 'b9d36ca3-edb0-3c29-8176-c2af91aa0222'],
  [12, 'Liner', null, 0, null, 'b8e7f026-be35-3d73-a082-a7bcf26c9fd6'],
  [13, 'Watermark', null, 0, null, 'aa17a439-aed9-381f-969b-e9a4bae7a57a'],
  [14, 'Raw/Unedited', null, 0, 'A scan that has not been cleaned up.', 'c76e83e2-d175-4487-9e58-d960eb6fad4f'],
  [15, 'Matrix/Runout', null, 0, null, '769dd9f7-3847-4f0a-a687-806ad2cf839d'],
  [48, 'Top', null, 0, null, 'cf9985e0-9eee-4cbb-88f9-992aa3062e48'],
  [49, 'Bottom', null, 0, null, '0b7128b0-7b36-4879-8d03-0333132a2106'],
  [81, 'Panel', null, 0, null, '1e5e8b3f-8d36-4a42-9ed1-8a5f8c1b2a11'],
];

/** The Event Art Archive's art types (`event_art_archive.art_type`): the schema seeds Poster alone. */
export const EVENT_ART_TYPES: Value[][] = [[1, 'Poster', null, 0, null, '1e6f9a0b-6a2d-3f5e-9d6c-0b1a2c3d4e5f']];

export const IMAGE_TYPES: Value[][] = [
  ['image/jpeg', 'jpg'],
  ['image/png', 'png'],
  ['image/gif', 'gif'],
  ['application/pdf', 'pdf'],
];

export interface DumpMeta {
  timestamp?: string;
  replicationSequence?: number;
  schemaSequence?: number;
}

async function writeMeta(dir: string, meta: DumpMeta): Promise<void> {
  await writeFile(path.join(dir, 'TIMESTAMP'), `${meta.timestamp ?? '2026-11-01 00:00:00.000000+00'}\n`);
  await writeFile(path.join(dir, 'REPLICATION_SEQUENCE'), `${meta.replicationSequence ?? 170000}\n`);
  await writeFile(path.join(dir, 'SCHEMA_SEQUENCE'), `${meta.schemaSequence ?? 30}\n`);
}

/**
 * Writes a small dump from rows given per file (values, escaped here). Files not
 * given are written empty, except art_type and image_type (the real ones) and `edit`
 * (left out unless given). The Event Art Archive's files are written (event_art_archive.art_type
 * the real one) when any of them is given, else left out.
 */
export async function writeDump(dir: string, tables: Partial<Record<string, Value[][]>>, meta: DumpMeta = {}): Promise<string> {
  const mb = path.join(dir, 'mbdump');
  await mkdir(mb, { recursive: true });
  const all: Record<string, Value[][] | undefined> = {
    'cover_art_archive.art_type': ART_TYPES,
    'cover_art_archive.image_type': IMAGE_TYPES,
    ...tables,
  };
  for (const file of Object.keys(COLUMNS)) {
    const rows = all[file];
    if (rows === undefined && file === 'edit') continue;
    for (const row of rows ?? []) {
      if (row.length !== COLUMNS[file]) throw new Error(`test dump: ${file} row has ${row.length} columns, not ${COLUMNS[file]}`);
    }
    await writeFile(path.join(mb, file), (rows ?? []).map(copyLine).join(''));
  }
  if (Object.keys(EVENT_COLUMNS).some((file) => tables[file] !== undefined)) {
    const events: Record<string, Value[][] | undefined> = { 'event_art_archive.art_type': EVENT_ART_TYPES, ...tables };
    for (const [file, width] of Object.entries(EVENT_COLUMNS)) {
      const rows = events[file] ?? [];
      for (const row of rows) if (row.length !== width) throw new Error(`test dump: ${file} row has ${row.length} columns, not ${width}`);
      await writeFile(path.join(mb, file), rows.map(copyLine).join(''));
    }
  }
  await writeMeta(dir, meta);
  return dir;
}

/** Numbers in [0, 1) from mulberry32. */
function prng(seed: number): () => number {
  const next = mulberry32(seed);
  return () => next() / 4294967296;
}

function hex(n: number, width: number): string {
  return (n >>> 0).toString(16).padStart(8, '0').slice(-width);
}

/** A version-4-shaped UUID derived from (kind, id): the same every time. */
export function genGid(kind: number, id: number): string {
  const r = prng(kind * 1_000_003 + id * 7919 + 17);
  const w = () => Math.floor(r() * 4294967296);
  const a = w();
  const b = w();
  const c = w();
  const d = w();
  return `${hex(a, 8)}-${hex(b, 4)}-4${hex(b >>> 16, 3)}-${(8 + (c & 3)).toString(16)}${hex(c >>> 8, 3)}-${hex(d, 8)}${hex(c >>> 16, 4)}`;
}

export const KIND = { release: 1, group: 2, releaseRedirect: 3, groupRedirect: 4, event: 5, eventRedirect: 6 } as const;

export interface GenerateOptions {
  releases: number;
  images: number;
  /** Include mbdump/edit (one add-edit per image plus unrelated edits). */
  edits?: boolean;
  /** Include the Event Art Archive's files: this many events, about one image each (none: the files are left out). */
  events?: number;
  /** 2: a later dump: some releases, images and redirects gone, some renamed, new ones added. */
  variant?: 1 | 2;
  seed?: number;
  meta?: DumpMeta;
}

export interface GeneratedDump {
  dir: string;
  /** Lines written per file. */
  rows: Record<string, number>;
  total: number;
  groups: number;
}

class Out {
  private readonly stream;
  private buf = '';
  rows = 0;
  constructor(file: string) {
    this.stream = createWriteStream(file);
  }
  async row(values: Value[]): Promise<void> {
    this.buf += copyLine(values);
    this.rows++;
    if (this.buf.length >= 1 << 20) await this.drain();
  }
  private async drain(): Promise<void> {
    const chunk = this.buf;
    this.buf = '';
    if (!this.stream.write(chunk)) await once(this.stream, 'drain');
  }
  async close(): Promise<void> {
    await this.drain();
    this.stream.end();
    await once(this.stream, 'finish');
  }
}

/** Names with characters that must be escaped in the COPY format, every so often. */
function nameOf(kind: string, i: number, variant: number): string {
  const base = `${kind} ${i}${variant === 2 && i % 7 === 0 ? ' (remastered)' : ''}`;
  switch (i % 97) {
    case 1:
      return `${base}\twith a tab`;
    case 2:
      return `${base}\nwith a newline`;
    case 3:
      return `${base} back\\slash`;
    case 4:
      return `${base} — Ünïcödé ✓`;
    default:
      return base;
  }
}

function timestamp(r: () => number): string {
  const ms = Date.UTC(2012, 0, 26) + Math.floor(r() * 4e11);
  const d = new Date(ms);
  const micro = String(Math.floor(r() * 1e6)).padStart(6, '0');
  return `${d.toISOString().slice(0, 19).replace('T', ' ')}.${micro}+00`;
}

/**
 * Generates a dump of `releases` releases and about `images` images, streaming (memory
 * does not grow with the size). Variant 2 is the same catalogue a little later.
 */
export async function generateDump(dir: string, opts: GenerateOptions): Promise<GeneratedDump> {
  const variant = opts.variant ?? 1;
  const r = prng(opts.seed ?? 42);
  const mb = path.join(dir, 'mbdump');
  await mkdir(mb, { recursive: true });
  await writeMeta(dir, opts.meta ?? (variant === 2 ? { timestamp: '2026-11-08 00:00:00.000000+00', replicationSequence: 170168 } : {}));
  const N = opts.releases + (variant === 2 ? Math.floor(opts.releases / 50) : 0);
  const G = Math.max(1, Math.floor(opts.releases * 0.7));
  const gone = (i: number) => variant === 2 && i % 53 === 0;
  const groupOf = (i: number) => ((i - 1) % G) + 1;
  const rows: Record<string, number> = {};
  const open = (file: string) => new Out(path.join(mb, file));

  const art = open('cover_art_archive.art_type');
  for (const row of ART_TYPES) await art.row(row);
  await art.close();
  rows['cover_art_archive.art_type'] = art.rows;
  const img = open('cover_art_archive.image_type');
  for (const row of IMAGE_TYPES) await img.row(row);
  await img.close();
  rows['cover_art_archive.image_type'] = img.rows;

  const rg = open('release_group');
  for (let g = 1; g <= G; g++) {
    await rg.row([g, genGid(KIND.group, g), nameOf('Group', g, variant), 1 + (g % 5000), g % 3 === 0 ? null : 1 + (g % 3), '', g % 40 === 0 ? 1 : 0, timestamp(r)]);
  }
  await rg.close();
  rows.release_group = rg.rows;

  const rel = open('release');
  const country = open('release_country');
  const unknown = open('release_unknown_country');
  for (let i = 1; i <= N; i++) {
    if (gone(i)) continue;
    await rel.row([
      i,
      genGid(KIND.release, i),
      nameOf('Release', i, variant),
      1 + (i % 5000),
      groupOf(i),
      i % 4 === 0 ? null : 1,
      i % 5 === 0 ? null : 1,
      i % 6 === 0 ? null : 120,
      i % 6 === 0 ? null : 28,
      i % 3 === 0 ? null : String(1000000000000 + i),
      i % 10 === 0 ? 'a comment' : '',
      i % 30 === 0 ? 1 : 0,
      -1,
      timestamp(r),
    ]);
    const y = 1950 + Math.floor(r() * 75);
    const m = r() < 0.2 ? null : 1 + Math.floor(r() * 12);
    const d = m === null || r() < 0.3 ? null : 1 + Math.floor(r() * 28);
    const events = i % 10 < 6 ? 1 : i % 10 < 7 ? 2 : 0;
    for (let k = 0; k < events; k++) await country.row([i, 1 + ((i + k) % 250), k === 0 ? y : y + 1, m, d]);
    if (i % 5 === 0) await unknown.row([i, i % 15 === 0 ? null : y - 1, null, null]);
  }
  await rel.close();
  await country.close();
  await unknown.close();
  rows.release = rel.rows;
  rows.release_country = country.rows;
  rows.release_unknown_country = unknown.rows;

  // Merged MBIDs: old gids (their own kind) pointing at live releases and groups.
  const rr = open('release_gid_redirect');
  for (let k = 1; k <= Math.floor(opts.releases / 20); k++) {
    if (variant === 2 && k % 9 === 0) continue;
    let target = 1 + ((k * 7919) % N);
    while (gone(target)) target = 1 + (target % N);
    await rr.row([genGid(KIND.releaseRedirect, k), target, timestamp(r)]);
  }
  await rr.close();
  rows.release_gid_redirect = rr.rows;
  const gr = open('release_group_gid_redirect');
  for (let k = 1; k <= Math.floor(G / 20); k++) await gr.row([genGid(KIND.groupRedirect, k), 1 + ((k * 104729) % G), timestamp(r)]);
  await gr.close();
  rows.release_group_gid_redirect = gr.rows;

  // Images: ids increase with time, as the real formula makes them; orderings 1..n per release.
  const ca = open('cover_art_archive.cover_art');
  const cat = open('cover_art_archive.cover_art_type');
  const ed = opts.edits === true ? open('edit') : undefined;
  const ordering = new Uint16Array(N + 1);
  let id = 100_000_000;
  const imageCount = opts.images + (variant === 2 ? Math.floor(opts.images / 40) : 0);
  for (let j = 1; j <= imageCount; j++) {
    id += 1 + Math.floor(r() * 1000);
    let release = 1 + Math.floor(((j * 2654435761) >>> 0) % N);
    while (gone(release)) release = 1 + (release % N);
    if (variant === 2 && j % 31 === 0) continue; // removed since
    const o = ++ordering[release];
    const png = j % 9 === 0;
    const edit = 5_000_000 + j;
    await ca.row([
      id,
      release,
      j % 13 === 0 ? `scan\twith tab, line\nbreak and \\ backslash ${j}` : j % 5 === 0 ? 'front cover' : '',
      edit,
      o,
      timestamp(r),
      j % 50 === 0 ? 1 : 0,
      png ? 'image/png' : 'image/jpeg',
      j % 4 === 0 ? null : 100000 + (j % 900000),
      j % 4 === 0 ? null : 20000,
      j % 4 === 0 ? null : 50000,
      j % 4 === 0 ? null : 150000,
    ]);
    const types = o === 1 ? [1] : o === 2 ? [2] : [3 + (j % 10)];
    if (o === 1 && j % 17 === 0) types.push(14);
    if (j % 7 === 0 && !types.includes(8)) types.push(8);
    for (const t of types) await cat.row([id, t]);
    if (ed !== undefined) {
      const open_time = timestamp(r);
      await ed.row([edit, 1 + (j % 9000), 314, j % 50 === 0 ? 1 : 2, 0, open_time, j % 50 === 0 ? null : open_time, open_time, null, 1]);
      // An edit of something else, which the import skips.
      if (j % 10 === 0) await ed.row([9_000_000 + j, 7, 1, 2, 1, open_time, open_time, open_time, null, 1]);
    }
  }
  await ca.close();
  await cat.close();
  rows['cover_art_archive.cover_art'] = ca.rows;
  rows['cover_art_archive.cover_art_type'] = cat.rows;
  if (opts.events !== undefined) await generateEvents(open, { events: opts.events, variant, firstId: id, r, ed }, rows);
  if (ed !== undefined) {
    await ed.close();
    rows.edit = ed.rows;
  }

  // Editor-chosen releases for some groups: a later release of the group when there is one.
  const rgca = open('cover_art_archive.release_group_cover_art');
  for (let g = 30; g <= G; g += 30) {
    let release = g + G <= N ? g + G : g;
    if (gone(release)) release = g;
    if (gone(release)) continue;
    await rgca.row([g, variant === 2 && g % 90 === 0 ? g : release]);
  }
  await rgca.close();
  rows['cover_art_archive.release_group_cover_art'] = rgca.rows;

  return { dir, rows, total: Object.values(rows).reduce((a, b) => a + b, 0), groups: G };
}

/**
 * The Event Art Archive's files: `events` events (variant 2: every 11th gone, some renamed,
 * new ones), merged MBIDs, about one image per event (ids after the cover art's), every
 * other one typed Poster, their add-edits in `ed` when the dump has the edit table.
 */
async function generateEvents(
  open: (file: string) => Out,
  o: { events: number; variant: number; firstId: number; r: () => number; ed: Out | undefined },
  rows: Record<string, number>,
): Promise<void> {
  const { variant, r, ed } = o;
  const N = o.events + (variant === 2 ? Math.floor(o.events / 20) : 0);
  const gone = (i: number) => variant === 2 && i % 11 === 0;
  const kinds = open('event_art_archive.art_type');
  for (const row of EVENT_ART_TYPES) await kinds.row(row);
  await kinds.close();
  rows['event_art_archive.art_type'] = kinds.rows;

  const ev = open('event');
  for (let i = 1; i <= N; i++) {
    if (gone(i)) continue;
    const y = 1960 + (i % 60);
    // id, gid, name, begin y/m/d, end y/m/d, time, type, cancelled, setlist, comment, edits_pending, last_updated, ended
    await ev.row([i, genGid(KIND.event, i), nameOf('Event', i, variant), y, 1 + (i % 12), 1 + (i % 28), y, null, null, i % 3 === 0 ? '20:00:00' : null, 1 + (i % 4), i % 25 === 0 ? 't' : 'f', i % 5 === 0 ? '* a song\n* another' : null, '', 0, timestamp(r), 't']);
  }
  await ev.close();
  rows.event = ev.rows;
  const evr = open('event_gid_redirect');
  for (let k = 1; k <= Math.floor(o.events / 10); k++) {
    let target = 1 + ((k * 7919) % N);
    while (gone(target)) target = 1 + (target % N);
    await evr.row([genGid(KIND.eventRedirect, k), target, timestamp(r)]);
  }
  await evr.close();
  rows.event_gid_redirect = evr.rows;

  const ea = open('event_art_archive.event_art');
  const eat = open('event_art_archive.event_art_type');
  const ordering = new Uint16Array(N + 1);
  let id = o.firstId;
  for (let j = 1; j <= N; j++) {
    id += 1 + Math.floor(r() * 1000);
    const event = 1 + Math.floor(((j * 2654435761) >>> 0) % N);
    if (gone(event) || (variant === 2 && j % 13 === 0)) continue;
    const edit = 7_000_000 + j;
    await ea.row([id, event, j % 6 === 0 ? 'flyer' : '', edit, ++ordering[event], timestamp(r), 0, j % 8 === 0 ? 'image/png' : 'image/jpeg', 90000 + j, 20000, 50000, null]);
    if (j % 2 === 1) await eat.row([id, 1]);
    if (ed !== undefined) {
      const t = timestamp(r);
      await ed.row([edit, 1 + (j % 9000), 158, 2, 0, t, j % 40 === 0 ? null : t, t, null, 1]);
    }
  }
  await ea.close();
  await eat.close();
  rows['event_art_archive.event_art'] = ea.rows;
  rows['event_art_archive.event_art_type'] = eat.rows;
}
