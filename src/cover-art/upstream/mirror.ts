import { setMaxListeners } from 'node:events';
import type { Db } from '../../db/schema.js';
import type { Clock } from '../../shared/clock.js';
import { invalidInput } from '../../shared/errors.js';
import type { ObjectStore } from '../../storage/index.js';
import { folderKey, imageKey, originalKey, type ThumbnailSize } from '../files/keys.js';
import { RateLimit } from './mirror-rate.js';
import type { FailCode, KnownFile, Upstream } from './upstream.js';

/*
 * The bulk mirror (`sleeve mirror images`; docs/mirroring.md, "Bulk mirror"): every file of the
 * chosen imported releases and events that the store lacks is fetched through Upstream.fetchOrMake (the
 * pull-through's checks and atomic store), verified against the md5 the upstream's
 * `_files.xml` publishes. Resumable because it skips what the store has; docs/decisions.md,
 * "Bulk mirror".
 */

export type MirrorSize = ThumbnailSize | 'original';
export const MIRROR_SIZES: readonly MirrorSize[] = ['original', 250, 500, 1200];

/** Why a file was not mirrored: the upstream has no such file, or fetchFile's failure codes. */
export type MirrorFailure = 'not_found' | Exclude<FailCode, 'interrupted'>;
const FAILURES: readonly MirrorFailure[] = ['not_found', 'checksum', 'invalid', 'too_large', 'upstream_error', 'timeout', 'busy'];

/** At most this many failures are listed by key in the summary (all are counted). */
const LISTED_FAILURES = 50;
/** Releases read from the database per query with --all. */
const RELEASE_BATCH = 500;

export interface MirrorProgress {
  /** Files looked at so far: fetched, skipped or failed. */
  done: number;
  /** Files to look at in all; undefined with --all (not counted beforehand). */
  total: number | undefined;
  fetched: number;
  failed: number;
  bytes: number;
  /** Milliseconds since the start. */
  elapsedMs: number;
}

export interface MirrorSummary {
  releases: number;
  /** Events mirrored (present only when there were any). */
  events?: number;
  files: number;
  fetched: number;
  /** Already in the store. */
  skipped: number;
  failed: Record<MirrorFailure, number>;
  failed_total: number;
  /** Fetched files the upstream's `_files.xml` gave no md5 for (checked as pull-through checks, not by checksum). */
  unverified: number;
  bytes: number;
  seconds: number;
  /** Stopped by a signal before every file was looked at. */
  interrupted: boolean;
  /** The first failures, by key. */
  failures: { key: string; reason: MirrorFailure; message: string }[];
}

export interface MirrorDeps {
  db: Db;
  store: ObjectStore;
  clock: Clock;
  upstream: Upstream;
}

export interface MirrorOptions {
  /** MBIDs of releases or events, or every release and event with imported images. */
  releases: string[] | 'all';
  sizes: readonly MirrorSize[];
  /** Files fetched at once. */
  concurrency: number;
  /** Most files fetched per second; undefined: no cap. */
  rate: number | undefined;
  /** Stops the run: no new file is started, downloads in flight are abandoned (nothing stored of them). */
  signal: AbortSignal;
  progress?: (p: MirrorProgress) => void;
}

/** A release or an event (the Event Art Archive's items are `mbid-{event}` as well). */
interface ReleaseRow {
  id: number;
  gid: string;
  entity?: 'event';
}

interface ImageRow {
  id: number;
  /** The release's or event's id. */
  release: number;
  mime_type: string;
  suffix: string;
}

/** Runs at most `n` tasks at once; run() resolves when the task has started. A task's error calls `onError` (once). */
class Slots {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly running = new Set<Promise<void>>();
  private failure: unknown;
  private failed = false;

  constructor(
    private readonly n: number,
    private readonly onError: () => void,
  ) {}

  async run(task: () => Promise<void>): Promise<void> {
    while (this.active >= this.n) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active++;
    const p = task()
      .catch((err: unknown) => {
        if (!this.failed) {
          this.failed = true;
          this.failure = err;
          this.onError();
        }
      })
      .finally(() => {
        this.active--;
        this.running.delete(p);
        this.waiting.shift()?.();
      });
    this.running.add(p);
  }

  /** Waits for every started task; rethrows the first task's error. */
  async drain(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
    if (this.failed) throw this.failure;
  }
}

/** Mirrors the files; resolves to the summary (also when interrupted). Store failures are thrown. */
export async function mirrorImages(deps: MirrorDeps, options: MirrorOptions): Promise<MirrorSummary> {
  const { db, store, clock, upstream } = deps;
  // Where the store has them (a folder), each release's files are written as a batch: one folder fsync for all.
  const batch = store.batchWrites;
  // Stopped by the caller's signal, or by a task's error (the store down): no new file either way.
  const stop = new AbortController();
  // Each GET in flight listens for the stop (up to --concurrency of them, and the rate limit's
  // wait): not a leak, so no MaxListenersExceededWarning on stderr past ten.
  setMaxListeners(0, stop.signal);
  const stopNow = () => stop.abort();
  options.signal.addEventListener('abort', stopNow, { once: true });
  const signal = stop.signal;
  const start = clock.now();
  const failed = Object.fromEntries(FAILURES.map((f) => [f, 0])) as Record<MirrorFailure, number>;
  const summary: MirrorSummary = { releases: 0, files: 0, fetched: 0, skipped: 0, failed, failed_total: 0, unverified: 0, bytes: 0, seconds: 0, interrupted: false, failures: [] };
  let total: number | undefined;
  const limit = options.rate === undefined ? undefined : new RateLimit(options.rate, Math.max(1, Math.min(options.rate, options.concurrency)), clock);

  const report = () =>
    options.progress?.({
      done: summary.fetched + summary.skipped + summary.failed_total,
      total,
      fetched: summary.fetched,
      failed: summary.failed_total,
      bytes: summary.bytes,
      elapsedMs: clock.now() - start,
    });
  const fail = (key: string, reason: MirrorFailure, message: string) => {
    failed[reason]++;
    summary.failed_total++;
    if (summary.failures.length < LISTED_FAILURES) summary.failures.push({ key, reason, message });
  };

  /** Fetches one file; true when it was stored (its folder's entry made durable by the caller, where the store has batch writes). */
  const fetchOne = async (file: KnownFile, md5s: Map<string, string> | undefined): Promise<boolean> => {
    if (limit !== undefined && !(await limit.take(signal))) return false;
    if (signal.aborted) return false;
    const md5 = md5s?.get(fileName(file.key));
    const originalMd5 = md5s?.get(fileName(originalKey(file.mbid, file.id, file.suffix)));
    const got = await upstream.fetchOrMake(file, { md5, originalMd5, signal, batch });
    if (got.kind === 'stored') {
      summary.fetched++;
      summary.bytes += got.bytes;
      if (md5 === undefined) summary.unverified++;
    } else if (got.kind === 'absent') fail(file.key, 'not_found', 'the upstream has no such file');
    else if (got.code !== 'interrupted') fail(file.key, got.code, got.reason);
    report();
    return got.kind === 'stored';
  };

  const files = new Slots(options.concurrency, stopNow);
  const releases = new Slots(options.concurrency, stopNow);

  const mirrorRelease = async (release: ReleaseRow, images: ImageRow[]): Promise<void> => {
    const wanted: KnownFile[] = [];
    for (const image of images)
      for (const size of options.sizes) {
        const s = size === 'original' ? undefined : size;
        wanted.push({ key: imageKey(release.gid, image.id, image.suffix, s), mbid: release.gid, id: image.id, size: s, mime: image.mime_type, suffix: image.suffix });
      }
    summary.files += wanted.length;
    // One listing of the release's folder, not a stat (or an S3 HEAD) per file.
    const present = new Set(await (batch === undefined ? store.list(`${folderKey(release.gid)}/`) : batch.batchList(`${folderKey(release.gid)}/`)));
    const missing = wanted.filter((f) => !present.has(f.key));
    summary.skipped += wanted.length - missing.length;
    report();
    if (missing.length === 0 || signal.aborted) return;
    const md5s = await upstream.checksums(release.gid, signal);
    const fetches: Promise<boolean>[] = [];
    for (const file of missing) {
      if (signal.aborted) break;
      await files.run(() => {
        const p = fetchOne(file, md5s);
        fetches.push(p);
        return p.then(() => {});
      });
    }
    // The release's folder made durable once for all its files, also when stopped (a store failure is the task's, and thrown by drain).
    const stored = await Promise.allSettled(fetches);
    if (batch !== undefined && stored.some((s) => s.status === 'fulfilled' && s.value)) await batch.syncFolder(folderKey(release.gid));
  };

  const batches = options.releases === 'all' ? allItems(db) : namedReleases(db, options.releases);
  try {
    for await (const batch of batches) {
      const images = await imagesOf(db, batch);
      if (options.releases !== 'all' && total === undefined) total = images.length * options.sizes.length;
      for (const release of batch) {
        if (signal.aborted) break;
        if (release.entity === 'event') summary.events = (summary.events ?? 0) + 1;
        else summary.releases++;
        // Release and event ids are of two tables: matched with the entity too.
        const mine = images.filter((i) => i.release === release.id && i.entity === release.entity);
        await releases.run(() => mirrorRelease(release, mine));
      }
      if (signal.aborted) break;
    }
  } finally {
    // Wait for what has started (its downloads are abandoned when interrupted), also on an error.
    await releases.drain().finally(() => files.drain());
    options.signal.removeEventListener('abort', stopNow);
  }
  summary.interrupted = options.signal.aborted;
  summary.seconds = Math.round(clock.now() - start) / 1000;
  report();
  return summary;
}

/** A key's file name in its item (what `_files.xml` names it): the key without its folder. */
function fileName(key: string): string {
  return key.slice(key.indexOf('/') + 1);
}

/**
 * The named releases, as one batch. Unknown MBIDs, and releases that were not imported (their
 * images are sleeve's own: nothing upstream to mirror), are refused, all named, before
 * anything is fetched.
 */
async function* namedReleases(db: Db, mbids: string[]): AsyncGenerator<ReleaseRow[]> {
  const unique = [...new Set(mbids.map((m) => m.toLowerCase()))];
  const rows: (ReleaseRow & { imported: number })[] = unique.length === 0 ? [] : await db.selectFrom('release').select(['id', 'gid', 'imported']).where('gid', 'in', unique).execute();
  const others = unique.filter((m) => !rows.some((r) => r.gid === m));
  if (others.length > 0) {
    for (const e of await db.selectFrom('event').select(['id', 'gid', 'imported']).where('gid', 'in', others).execute()) rows.push({ ...e, entity: 'event' });
  }
  const byGid = new Map(rows.map((r) => [r.gid, r]));
  const unknown = unique.filter((m) => !byGid.has(m));
  const local = unique.filter((m) => byGid.get(m)?.imported === 0);
  const problems = [
    ...(unknown.length > 0 ? [`no such release or event: ${unknown.join(', ')}`] : []),
    ...(local.length > 0 ? [`not imported from MusicBrainz (nothing upstream to mirror): ${local.join(', ')}`] : []),
  ];
  if (problems.length > 0) throw invalidInput(`${problems.join('; ')}; nothing was fetched`);
  yield unique.map((m) => {
    const { id, gid, entity } = byGid.get(m) as ReleaseRow;
    return entity === undefined ? { id, gid } : { id, gid, entity };
  });
}

/** Every release with imported images, then every event with imported images. */
async function* allItems(db: Db): AsyncGenerator<ReleaseRow[]> {
  yield* allReleases(db);
  yield* allEvents(db);
}

/** Every event with imported images, by id, a batch at a time. */
async function* allEvents(db: Db): AsyncGenerator<ReleaseRow[]> {
  let after = 0;
  for (;;) {
    const batch = await db
      .selectFrom('event as e')
      .select(['e.id', 'e.gid'])
      .where('e.id', '>', after)
      .where(({ exists, selectFrom }) => exists(selectFrom('event_art as ea').select('ea.id').whereRef('ea.event', '=', 'e.id').where('ea.imported', '=', 1)))
      .orderBy('e.id')
      .limit(RELEASE_BATCH)
      .execute();
    if (batch.length === 0) return;
    yield batch.map((e) => ({ id: e.id, gid: e.gid, entity: 'event' as const }));
    after = (batch[batch.length - 1] as { id: number }).id;
  }
}

/** Every release with imported images, by id, a batch at a time (keyset pagination: never all at once). */
async function* allReleases(db: Db): AsyncGenerator<ReleaseRow[]> {
  let after = 0;
  for (;;) {
    const batch = await db
      .selectFrom('release as r')
      .select(['r.id', 'r.gid'])
      .where('r.id', '>', after)
      .where(({ exists, selectFrom }) => exists(selectFrom('cover_art as ca').select('ca.id').whereRef('ca.release', '=', 'r.id').where('ca.imported', '=', 1)))
      .orderBy('r.id')
      .limit(RELEASE_BATCH)
      .execute();
    if (batch.length === 0) return;
    yield batch;
    after = (batch[batch.length - 1] as ReleaseRow).id;
  }
}

/** The imported images of a batch of releases and events, with their suffixes. */
async function imagesOf(db: Db, items: ReleaseRow[]): Promise<(ImageRow & { entity?: 'event' })[]> {
  const releases = items.filter((i) => i.entity === undefined);
  const events = items.filter((i) => i.entity === 'event');
  const out: (ImageRow & { entity?: 'event' })[] = await releaseImages(db, releases);
  if (events.length > 0) {
    const rows = await db
      .selectFrom('event_art as ea')
      .innerJoin('image_type as it', 'it.mime_type', 'ea.mime_type')
      .select(['ea.id', 'ea.event', 'ea.mime_type', 'it.suffix'])
      .where(
        'ea.event',
        'in',
        events.map((e) => e.id),
      )
      .where('ea.imported', '=', 1)
      .orderBy('ea.event')
      .orderBy('ea.id')
      .execute();
    for (const r of rows) out.push({ id: r.id, release: r.event, mime_type: r.mime_type, suffix: r.suffix, entity: 'event' });
  }
  return out;
}

async function releaseImages(db: Db, releases: ReleaseRow[]): Promise<ImageRow[]> {
  if (releases.length === 0) return [];
  return db
    .selectFrom('cover_art as ca')
    .innerJoin('image_type as it', 'it.mime_type', 'ca.mime_type')
    .select(['ca.id', 'ca.release', 'ca.mime_type', 'it.suffix'])
    .where(
      'ca.release',
      'in',
      releases.map((r) => r.id),
    )
    .where('ca.imported', '=', 1)
    .orderBy('ca.release')
    .orderBy('ca.id')
    .execute();
}

/** Parses `--sizes 250,500,1200,original`. */
export function parseSizes(text: string): MirrorSize[] {
  const out: MirrorSize[] = [];
  for (const part of text.split(',')) {
    const word = part.trim().toLowerCase();
    const size = word === 'original' ? 'original' : MIRROR_SIZES.find((s) => String(s) === word);
    if (size === undefined) throw invalidInput(`--sizes takes 250, 500, 1200 and original, separated by commas (not ${JSON.stringify(part)})`);
    if (!out.includes(size)) out.push(size);
  }
  return MIRROR_SIZES.filter((s) => out.includes(s));
}
