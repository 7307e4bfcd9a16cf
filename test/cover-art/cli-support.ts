/*
 * Helpers shared by the CLI tests (cli*.test.ts, config.test.ts): looking at what a
 * command left behind in the storage directory and the database, from the outside.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import pg from 'pg';
import { loadConfig } from '../../src/config/load.js';
import { openDatabase } from '../../src/db/connect.js';
import { CLI, runCli, type CliResult, type TestEnv } from '../helpers/env.js';

/** The interface's id formula, `int((time() - 1327528905) * 100)`, computed independently of src/. */
export function formulaId(ms: number): number {
  return Math.floor((ms / 1000 - 1327528905) * 100);
}

export function newMbid(): string {
  return randomUUID();
}

/** Writes bytes to a file in the test's data directory (outside the storage tree); returns its path. */
export async function writeInput(t: TestEnv, name: string, bytes: Buffer | string): Promise<string> {
  const file = path.join(t.dir, `in-${name}`);
  await writeFile(file, bytes);
  return file;
}

export function filesRoot(t: TestEnv): string {
  return path.join(t.dir, 'files');
}

export function releaseFolder(t: TestEnv, mbid: string): string {
  return path.join(filesRoot(t), `mbid-${mbid}`);
}

/** Every file under the storage root (dot files included), relative path → sha256. */
export async function storageTree(t: TestEnv): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (rel: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(path.join(filesRoot(t), rel), { withFileTypes: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    for (const e of entries) {
      const p = rel === '' ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory()) {
        out[`${p}/`] = 'dir';
        await walk(p);
      } else out[p] = createHash('sha256').update(await readFile(path.join(filesRoot(t), p))).digest('hex');
    }
  };
  await walk('');
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** File names in a release's folder, sorted. */
export async function folderFiles(t: TestEnv, mbid: string): Promise<string[]> {
  try {
    return (await readdir(releaseFolder(t, mbid))).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

export async function readIndexBytes(t: TestEnv, mbid: string): Promise<Buffer | undefined> {
  const file = path.join(releaseFolder(t, mbid), 'index.json');
  return existsSync(file) ? readFile(file) : undefined;
}

export async function readIndex(t: TestEnv, mbid: string): Promise<any> {
  const bytes = await readIndexBytes(t, mbid);
  if (bytes === undefined) throw new Error(`no index.json for ${mbid}`);
  return JSON.parse(bytes.toString('utf8'));
}

export const TABLES = [
  'release_group',
  'release',
  'release_gid_redirect',
  'release_group_gid_redirect',
  'release_group_cover_art',
  'cover_art',
  'cover_art_type',
  'counter',
] as const;

/** Every row of sleeve's catalogue tables, read straight from the database the env names. */
export async function dbDump(t: TestEnv): Promise<Record<string, string[]>> {
  const handle = await openDatabase(loadConfig(t.env).database, { poolSize: 1 });
  try {
    const out: Record<string, string[]> = {};
    for (const table of TABLES) {
      const rows = await handle.db.selectFrom(table as any).selectAll().execute();
      out[table] = rows.map((r) => JSON.stringify(Object.entries(r).sort(([a], [b]) => (a < b ? -1 : 1)))).sort();
    }
    return out;
  } finally {
    await handle.close();
  }
}

/** A release's images in the database (id as a string, ordering), in listing order. */
export async function dbImages(t: TestEnv, mbid: string): Promise<{ id: string; ordering: number }[]> {
  const handle = await openDatabase(loadConfig(t.env).database, { poolSize: 1 });
  try {
    const rows = await handle.db
      .selectFrom('cover_art as ca')
      .innerJoin('release as r', 'r.id', 'ca.release')
      .select(['ca.id', 'ca.ordering'])
      .where('r.gid', '=', mbid)
      .orderBy('ca.ordering')
      .orderBy('ca.id')
      .execute();
    return rows.map((r) => ({ id: String(r.id), ordering: Number(r.ordering) }));
  } finally {
    await handle.close();
  }
}

/** The ids of a release's images in the database, in listing order. */
export async function dbImageIds(t: TestEnv, mbid: string): Promise<string[]> {
  return (await dbImages(t, mbid)).map((r) => r.id);
}

/** A GET answer reduced to what a client sees: status, location and body. */
export async function fetchState(url: string): Promise<{ status: number; location: string | null; body: string }> {
  const res = await fetch(url, { redirect: 'manual', headers: { accept: 'application/json' } });
  return { status: res.status, location: res.headers.get('location'), body: await res.text() };
}

export interface Snapshot {
  tree: Record<string, string>;
  indexes: Record<string, string | null>;
  db: Record<string, string[]>;
  http: Record<string, unknown>;
}

/**
 * Everything a failed command must leave as it was: the storage tree with file hashes,
 * each release's index.json bytes, the database rows, and (with a server) what the API
 * answers for the releases, their images and their groups.
 */
export async function snapshot(t: TestEnv, releases: string[], base?: string, groups: string[] = []): Promise<Snapshot> {
  const indexes: Record<string, string | null> = {};
  for (const m of releases) indexes[m] = (await readIndexBytes(t, m))?.toString('utf8') ?? null;
  const http: Record<string, unknown> = {};
  if (base !== undefined) {
    for (const m of releases) {
      for (const p of ['', 'front', 'back', 'front-250']) http[`/release/${m}/${p}`] = await fetchState(`${base}/release/${m}/${p}`);
      const index = indexes[m];
      if (index !== null && index !== undefined) {
        for (const image of (JSON.parse(index) as { images: { id: string }[] }).images) {
          http[`/release/${m}/${image.id}`] = await fetchState(`${base}/release/${m}/${image.id}`);
        }
      }
    }
    for (const g of groups) http[`/release-group/${g}/`] = await fetchState(`${base}/release-group/${g}/`);
  }
  return { tree: await storageTree(t), indexes, db: await dbDump(t), http };
}

/** Spawns the CLI without waiting (to kill it, or to run several at once). */
export function spawnCli(env: Record<string, string>, args: string[]): { child: ChildProcess; done: Promise<CliResult & { signal: NodeJS.Signals | null }> } {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLEEVE_')));
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout?.on('data', (c: Buffer) => out.push(c));
  child.stderr?.on('data', (c: Buffer) => err.push(c));
  const done = new Promise<CliResult & { signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) =>
      resolve({ code: code ?? -1, signal, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }),
    );
  });
  return { child, done };
}

/** Runs the CLI, killing it (and failing) if it has not exited within `ms`. */
export async function runCliWithin(env: Record<string, string>, args: string[], ms: number): Promise<CliResult & { timedOut: boolean }> {
  const { child, done } = spawnCli(env, args);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, ms);
  try {
    return { ...(await done), timedOut };
  } finally {
    clearTimeout(timer);
  }
}

/** A usage or input error: exit 2, nothing on stdout, `sleeve: …` on stderr. */
export function assertRefused(r: CliResult, pattern: RegExp, exit = 2): void {
  const where = `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
  if (r.code !== exit) throw new Error(`expected exit ${exit}, got ${where}`);
  if (!r.stderr.startsWith('sleeve: ')) throw new Error(`expected a "sleeve: " message on stderr, got ${where}`);
  if (!pattern.test(r.stderr)) throw new Error(`expected stderr to match ${pattern}, got ${where}`);
}

export { runCli };

function crc32(buf: Buffer): number {
  let c = 0xffffffff;
  for (const byte of buf) {
    c ^= byte;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}

function pngChunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}

/**
 * A valid PNG of size×size 1-bit grey pixels, all black: a decompression bomb
 * (size² pixels in a file of a few dozen kilobytes).
 */
export function pngBomb(size: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr[8] = 1; // bit depth
  ihdr[9] = 0; // greyscale
  const row = 1 + Math.ceil(size / 8);
  const raw = Buffer.alloc(row * size); // filter 0, all zero bits
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(raw, { level: 9 })),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

export interface HeldLock {
  /** How many other sessions wait on a lock (PostgreSQL), or undefined where that cannot be seen (SQLite). */
  waiting(): Promise<number | undefined>;
  release(): Promise<void>;
}

/**
 * Holds, from the test process, the release's row (SELECT … FOR UPDATE) on PostgreSQL:
 * changes to the release started meanwhile pile up behind it, each having read what it
 * read before its first write, and are let go at the same moment by release(). On SQLite
 * holding the write lock would queue the processes at their first write (the id
 * allocation) and so spread them out again: there the lock is not taken, and the
 * processes simply run at once.
 */
export async function holdRelease(t: TestEnv, mbid: string): Promise<HeldLock> {
  const config = loadConfig(t.env).database;
  if (config.kind === 'sqlite') return { waiting: async () => undefined, release: async () => {} };
  const client = new pg.Client({ connectionString: config.url });
  await client.connect();
  await client.query('BEGIN');
  const row = await client.query('SELECT id FROM release WHERE gid = $1 FOR UPDATE', [mbid]);
  if (row.rowCount !== 1) throw new Error(`no release ${mbid} to hold`);
  return {
    waiting: async () => {
      // Inside a transaction the statistics views are a snapshot taken at first use.
      await client.query('SELECT pg_stat_clear_snapshot()');
      const r = await client.query("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
      return Number(r.rows[0].n);
    },
    release: async () => {
      await client.query('COMMIT');
      await client.end();
    },
  };
}
