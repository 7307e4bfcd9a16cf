/*
 * Uploads that a killed process cannot leave behind half-done.
 *
 * An upload writes its original and thumbnails under `uploads/{id}-{token}/` (a random
 * token: the staging names cannot be guessed, and the file server serves only the archive
 * layout, so nothing there is ever served), beside a lease: `lease.json` with the host,
 * the process id and a heartbeat renewed every few seconds. Only after the database
 * commit are the files moved to their public names. So:
 *
 * - killed before the commit: the image is not in the database and nothing is public;
 *   the sweep removes the staged files;
 * - killed after the commit: the sweep finishes the move (the image is real);
 * - an upload still running (its process alive on this machine, or its heartbeat fresh
 *   when it runs on another one) is never touched.
 *
 * The sweep runs at the start of every catalogue command and in every serving process
 * (SLEEVE_UPLOAD_SWEEP_MS). See docs/decisions.md, "Interrupted uploads".
 */
import { randomBytes } from 'node:crypto';
import { isStoreUnavailable } from '../../shared/errors.js';
import { hostTag, processAlive } from '../../shared/process.js';
import type { ObjectStore } from '../../storage/index.js';
import type { CoverArtDeps } from '../deps.js';
import { imageKey, THUMBNAIL_SIZES, type ThumbnailSize } from '../files/keys.js';

const STAGING_PREFIX = 'uploads/';
const LEASE = 'lease.json';
/** How often a running upload renews its heartbeat. */
const HEARTBEAT_MS = 5_000;
/** A lease of another machine whose heartbeat is older than this belongs to an upload that died. */
const FOREIGN_STALE_MS = 30_000;
/**
 * A lease of this machine whose process still runs is trusted this long without a heartbeat
 * (a stopped or hung process); after that its process id is taken to have been reused.
 */
const LOCAL_STALE_MS = 60 * 60 * 1000;

interface Lease {
  host: string;
  pid: number;
  heartbeat: number;
}

function stagedName(suffix: string, size: ThumbnailSize | undefined): string {
  return size === undefined ? `original.${suffix}` : `thumb${size}.jpg`;
}

/** One upload in flight: its staging folder and its lease. */
export class Upload {
  readonly id: number;
  readonly folder: string;
  private readonly deps: CoverArtDeps;
  private readonly suffix: string;
  private timer: NodeJS.Timeout | undefined;

  private constructor(deps: CoverArtDeps, id: number, suffix: string) {
    this.deps = deps;
    this.id = id;
    this.suffix = suffix;
    this.folder = `${STAGING_PREFIX}${id}-${randomBytes(12).toString('hex')}`;
  }

  /** Takes the lease (written before any file, so every staged file has one beside it) and starts its heartbeat. */
  static async begin(deps: CoverArtDeps, id: number, suffix: string): Promise<Upload> {
    const upload = new Upload(deps, id, suffix);
    await upload.renew();
    upload.timer = setInterval(() => void upload.renew().catch(() => {}), HEARTBEAT_MS);
    upload.timer.unref();
    return upload;
  }

  private async renew(): Promise<void> {
    const lease: Lease = { host: hostTag(), pid: process.pid, heartbeat: this.deps.clock.now() };
    await this.deps.store.put(`${this.folder}/${LEASE}`, Buffer.from(JSON.stringify(lease)), 'application/json');
  }

  stagedKey(size: ThumbnailSize | undefined): string {
    return `${this.folder}/${stagedName(this.suffix, size)}`;
  }

  /** Still ours: a sweep that judged this upload dead (a process stopped for long) removed the lease first. */
  async held(): Promise<boolean> {
    return (await this.deps.store.head(`${this.folder}/${LEASE}`)) !== undefined;
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Before the commit, on failure: the staged files go. */
  async abandon(): Promise<void> {
    this.stop();
    await this.deps.store.removeFolder(this.folder).catch(() => {});
  }

  /**
   * After the commit: the files to their public names, then the lease. With the store away
   * the upload stays staged, its lease goes stale, and a later sweep finishes it.
   */
  async finish(releaseGid: string): Promise<void> {
    this.stop();
    const missing = await publish(this.deps.store, this.folder, releaseGid, this.id, this.suffix);
    if (missing.length > 0) throw new Error(`image ${this.id} is saved, but its staged files were removed before they were published: ${missing.join(', ')}`);
  }
}

/**
 * Moves the staged files of a committed image to their public names, then removes the
 * staging folder. Returns the public names that are still missing (a staged file someone
 * removed by hand): nothing can bring those back.
 */
async function publish(store: ObjectStore, folder: string, releaseGid: string, id: number, suffix: string): Promise<string[]> {
  const missing: string[] = [];
  for (const size of [undefined, ...THUMBNAIL_SIZES]) {
    const to = imageKey(releaseGid, id, suffix, size);
    // Already moved by an earlier attempt, or the target written otherwise: either way it is in place.
    const moved = await store.move(`${folder}/${stagedName(suffix, size)}`, to);
    if (!moved && (await store.head(to)) === undefined) missing.push(to);
  }
  await store.removeFolder(folder);
  return missing;
}

function leaseIsLive(lease: Lease | undefined, now: number): boolean {
  if (lease === undefined) return false;
  const age = now - lease.heartbeat;
  if (lease.host === hostTag()) return processAlive(lease.pid) && age < LOCAL_STALE_MS;
  return age < FOREIGN_STALE_MS;
}

async function readLease(store: ObjectStore, folder: string): Promise<Lease | undefined> {
  const object = await store.get(`${folder}/${LEASE}`);
  if (object === undefined) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of object.body) chunks.push(chunk as Buffer);
  try {
    const lease = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Partial<Lease>;
    if (typeof lease.host === 'string' && typeof lease.pid === 'number' && typeof lease.heartbeat === 'number') return lease as Lease;
  } catch {
    // unreadable: as if there were none
  }
  return undefined;
}

export interface SweepResult {
  /** Uploads killed before their commit whose files were removed. */
  removed: number;
  /** Uploads killed after their commit whose files were moved into place. */
  finished: number;
}

/**
 * Removes what interrupted uploads left (and, with a file store, the part-written files of
 * dead processes), and finishes the uploads that were committed. Uploads whose lease is
 * live are left alone.
 */
async function sweepUploads(deps: CoverArtDeps): Promise<SweepResult> {
  const { store, db } = deps;
  const now = deps.clock.now();
  const result: SweepResult = { removed: 0, finished: 0 };
  await store.sweepTemporary(now);
  const folders = new Set<string>();
  for (const key of await store.list(STAGING_PREFIX)) {
    const m = /^uploads\/(\d{1,19})-[0-9a-f]+\//.exec(key);
    if (m !== null) folders.add(m[0].slice(0, -1));
  }
  for (const folder of folders) {
    if (leaseIsLive(await readLease(store, folder), now)) continue;
    const id = Number(/^uploads\/(\d+)-/.exec(folder)?.[1]);
    const row =
      (await db
        .selectFrom('cover_art as ca')
        .innerJoin('release as r', 'r.id', 'ca.release')
        .innerJoin('image_type as it', 'it.mime_type', 'ca.mime_type')
        .select(['r.gid', 'it.suffix'])
        .where('ca.id', '=', id)
        .executeTakeFirst()) ??
      // An event's image (cover-art/catalogue/events.ts): ids come from the same counter.
      (await db
        .selectFrom('event_art as ea')
        .innerJoin('event as e', 'e.id', 'ea.event')
        .innerJoin('image_type as it', 'it.mime_type', 'ea.mime_type')
        .select(['e.gid', 'it.suffix'])
        .where('ea.id', '=', id)
        .executeTakeFirst());
    if (row === undefined) {
      // The lease first: an upload that was only stopped, not dead, finds it gone and gives up before its commit.
      await store.delete(`${folder}/${LEASE}`);
      await store.removeFolder(folder);
      result.removed++;
    } else {
      // Wherever the image is now (a merge may have moved it since the commit).
      const missing = await publish(store, folder, row.gid, id, row.suffix);
      if (missing.length > 0) deps.warn?.(`image ${id} was saved by an upload that was interrupted, and some of its files are lost: ${missing.join(', ')}; remove the image and add it again`);
      result.finished++;
    }
  }
  return result;
}

/** sweepUploads for callers that go on without the store: an unavailable store is left for a later sweep. */
export async function sweepUploadsIfReachable(deps: CoverArtDeps): Promise<SweepResult | undefined> {
  try {
    return await sweepUploads(deps);
  } catch (err) {
    if (isStoreUnavailable(err)) return undefined;
    throw err;
  }
}

/** What the periodic sweep logs through (a pino logger fits). */
export interface SweepLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/**
 * A serving process's periodic sweep: every `intervalMs`, and once at once. A failing sweep
 * (the store away) is logged once per spell and tried again at the next turn.
 */
export function startUploadSweeper(deps: CoverArtDeps, intervalMs: number, log: SweepLog): { stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let failing = false;
  const withLog: CoverArtDeps = { ...deps, warn: (message) => log.warn({}, `upload sweep: ${message}`) };
  const tick = async () => {
    try {
      const r = await sweepUploads(withLog);
      if (r.removed > 0 || r.finished > 0) log.info({ removed: r.removed, finished: r.finished }, 'upload sweep: interrupted uploads cleaned up');
      failing = false;
    } catch (err) {
      if (!failing) log.warn({ err }, 'upload sweep failed; trying again at the next turn');
      failing = true;
    }
    if (!stopped) {
      timer = setTimeout(() => void tick(), intervalMs);
      timer.unref();
    }
  };
  void tick();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
