/*
 * What the live-catalogue tests share: the pair of servers they compare (one on an import of
 * the fixture, one reading the same rows live from a mirror's database), asking a server and
 * reading its listings.
 */
import path from 'node:path';
import { PassThrough } from 'node:stream';
import pg from 'pg';
import { loadConfig } from '../../src/config/load.js';
import { serve } from '../../src/serve.js';
import { cliOk, freePort, makeTestEnv, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { ADMIN, createMirror, type MirrorDb } from '../helpers/musicbrainz-db.js';
import { waitFor } from '../helpers/wait.js';
import { writeFixture } from './fixture.js';

/** A change must be answered within this (the promise is 60 s; the tests poll every 50 ms). */
export const SEEN_MS = 20_000;

export interface Answer {
  status: number;
  location: string | null;
  body: unknown;
}

/** What a server answers for `p`, its own address written as BASE; a redirect to its own listing followed. */
export async function answer(base: string, p: string): Promise<Answer> {
  const res = await fetch(`${base}${p}`, { redirect: 'manual', headers: { accept: 'application/json' } });
  const text = (await res.text()).split(base).join('BASE');
  const location = res.headers.get('location')?.split(base).join('BASE') ?? null;
  let body: unknown = text;
  if (res.status === 200 && text.startsWith('{')) body = JSON.parse(text);
  if (res.status === 307 && location?.endsWith('/index.json') === true && location.startsWith('BASE')) {
    const listing = await fetch(location.replace('BASE', base));
    body = { listing: listing.status, json: listing.status === 200 ? JSON.parse((await listing.text()).split(base).join('BASE')) : null };
  }
  return { status: res.status, location, body };
}

/** A release's or an event's listing as the server's redirect leads to it (undefined when there is none). */
export async function listingOf(base: string, entity: 'release' | 'event', mbid: string): Promise<any> {
  const a = await answer(base, `/${entity}/${mbid}/`);
  return (a.body as { json?: any })?.json;
}

/** The image ids of a listing, in its order. */
export const ids = (l: any): number[] => (l?.images ?? []).map((i: any) => Number(i.id));

/** The two servers a live-catalogue test compares, and what they stand on. */
export interface LivePair {
  /** sleeve with `sleeve import musicbrainz` of the fixture, and its server. */
  imported: TestEnv;
  importedServer: RunningServer;
  /** The mirror's database holding the same rows. */
  mirror: MirrorDb;
  /** sleeve reading the mirror live (SLEEVE_MUSICBRAINZ_DATABASE_URL, polled every 50 ms) as a role that may only read, and its server (its log lines in `logs`). */
  live: TestEnv;
  liveServer: RunningServer;
  /** Stops both servers, drops the mirror and the role, removes both environments. */
  close(): Promise<void>;
}

/** Starts a LivePair on the fixture (with its events when `events`), each server answering before this resolves. */
export async function startLivePair(options: { events: boolean; logs: string[] }): Promise<LivePair> {
  const schemas = ['musicbrainz', 'cover_art_archive', ...(options.events ? ['event_art_archive'] : [])].join(', ');
  // Roles are the server's, not the database's: dropped at the end.
  const reader = `sleeve_reader_${process.pid}_${Date.now().toString(36)}`;
  const pair: Partial<LivePair> = {};
  pair.close = async () => {
    await pair.liveServer?.server.close();
    await pair.importedServer?.server.close();
    await pair.mirror?.drop();
    await asAdmin('postgres', `DROP ROLE IF EXISTS ${reader}`).catch(() => {});
    await pair.live?.cleanup();
    await pair.imported?.cleanup();
  };
  try {
    pair.imported = await makeTestEnv();
    const dump = await writeFixture(path.join(pair.imported.dir, 'dump'), { events: options.events });
    pair.mirror = await createMirror(dump);
    await cliOk(pair.imported.env, ['--json', 'import', 'musicbrainz', dump]);
    pair.importedServer = await startServer(pair.imported);
    await asAdmin(pair.mirror.name, `CREATE ROLE ${reader} LOGIN`, `GRANT USAGE ON SCHEMA ${schemas} TO ${reader}`, `GRANT SELECT ON ALL TABLES IN SCHEMA ${schemas} TO ${reader}`);
    const readerUrl = new URL(pair.mirror.url);
    readerUrl.username = reader;
    pair.live = await makeTestEnv({ SLEEVE_MUSICBRAINZ_DATABASE_URL: readerUrl.href, SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS: '50', SLEEVE_LOG_LEVEL: 'info' });
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    Object.assign(pair.live.env, { SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_BASE_URL: base });
    const stream = new PassThrough();
    stream.on('data', (c: Buffer) => options.logs.push(...c.toString('utf8').split('\n').filter((l) => l !== '')));
    pair.liveServer = { server: await serve(loadConfig(pair.live.env), { only: 'coverart', logStream: stream }), base };
    await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200, { timeoutMs: SEEN_MS, what: 'the catalogue read once' });
    return pair as LivePair;
  } catch (err) {
    await pair.close();
    throw err;
  }
}

/** Runs statements as the PostgreSQL administrator in database `db`. */
export async function asAdmin(db: string, ...statements: string[]): Promise<void> {
  const url = new URL(ADMIN);
  url.pathname = `/${db}`;
  const c = new pg.Client({ connectionString: url.href });
  await c.connect();
  try {
    for (const st of statements) await c.query(st);
  } finally {
    await c.end();
  }
}
