import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { invalidInput } from '../shared/errors.js';
import { DUMP_META_FILES, DUMP_TABLES, EVENT_ART_FILE, type DumpTable } from './tables.js';

export interface DumpFile {
  table: DumpTable;
  path: string;
  size: number;
  /** Whole milliseconds: with the size, what tells a file changed since it was staged. */
  mtimeMs: number;
  /** The rows as a stream of COPY text instead of the file at `path` (the mirror's database read whole: import/live/bulk.ts). */
  open?: () => AsyncIterable<Buffer> & { destroy(): void };
}

export interface DumpDir {
  /** The mbdump/ folder itself. */
  dir: string;
  files: DumpFile[];
  /** TIMESTAMP, REPLICATION_SEQUENCE and SCHEMA_SEQUENCE, when present (trimmed). */
  meta: Partial<Record<(typeof DUMP_META_FILES)[number], string>>;
}

async function statOrUndefined(p: string) {
  try {
    return await stat(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
    throw err;
  }
}

/**
 * Finds the dump files: DIR may be the folder the tarballs were extracted in (holding
 * mbdump/) or mbdump/ itself. Every required file must be there; the edit table may not.
 * The Event Art Archive's tables are read when mbdump/event_art_archive.event_art is there,
 * and then all of them must be.
 */
export async function openDumpDir(given: string): Promise<DumpDir> {
  const root = path.resolve(given);
  const info = await statOrUndefined(root);
  if (info === undefined) throw invalidInput(`${given}: no such directory`);
  if (!info.isDirectory()) throw invalidInput(`${given} is not a directory (give the folder the dump was extracted in, or its mbdump/ folder)`);
  const nested = path.join(root, 'mbdump');
  const dir = (await statOrUndefined(nested))?.isDirectory() === true ? nested : root;

  const files: DumpFile[] = [];
  const missing: DumpTable[] = [];
  // The Event Art Archive's tables count when its tarball was extracted (docs/import.md, "Events").
  const withEvents = (await statOrUndefined(path.join(dir, EVENT_ART_FILE))) !== undefined;
  for (const table of DUMP_TABLES) {
    if (table.events === true && !withEvents) continue;
    const p = path.join(dir, table.file);
    const s = await statOrUndefined(p);
    if (s === undefined) {
      if (table.required || table.events === true) missing.push(table);
      continue;
    }
    if (!s.isFile()) throw invalidInput(`${p} is not a file`);
    files.push({ table, path: p, size: s.size, mtimeMs: Math.floor(s.mtimeMs) });
  }
  if (missing.length > 0) {
    const tarballs = [...new Set(missing.map((t) => t.tarball))];
    throw invalidInput(
      `${dir} lacks ${missing.map((t) => `mbdump/${t.file}`).join(', ')}; extract ${tarballs.join(' and ')} of the same dump there (see docs/import.md)`,
    );
  }

  const meta: DumpDir['meta'] = {};
  // The tarballs hold these beside mbdump/, so also look above it when DIR is mbdump/ itself.
  const places = [...new Set([root, dir, path.dirname(dir)])];
  for (const name of DUMP_META_FILES) {
    for (const where of places) {
      try {
        meta[name] = (await readFile(path.join(where, name), 'utf8')).trim().slice(0, 200);
        break;
      } catch {
        // optional
      }
    }
  }
  return { dir, files, meta };
}

/** The layout of staging (its tables and columns): staging of another layout is not resumed. 2: the event tables. */
const STAGING_FORMAT = 2;

/**
 * What identifies the dump as a whole (a new dump has a new TIMESTAMP or
 * REPLICATION_SEQUENCE), and the staging layout this version of sleeve writes.
 */
export function dumpIdentity(d: DumpDir): string {
  return JSON.stringify({ timestamp: d.meta.TIMESTAMP ?? null, replication_sequence: d.meta.REPLICATION_SEQUENCE ?? null, staging: STAGING_FORMAT });
}
