import { gzipSync } from 'node:zlib';
import type { PlainReply, PlainRequest } from '../shared/plain-http.js';
import { SESSION_COOKIE } from '../auth/pages.js';
import type { FollowingCache, FreshnessEvent } from '../cluster/cache-freshness.js';
import type { Clock } from '../shared/clock.js';

/**
 * The gallery pages as an anonymous visitor gets them, ready to write, answered before
 * routing by the website's listener (the auth app's `frontDoor`) as the cover art listener
 * answers its cached redirects (docs/decisions.md, "The gallery's front door").
 *
 * Filled by the pages themselves (a visitor's page, as sent), keyed by the exact request
 * target. Valid while the catalogue mark does not move: the catalogue watch empties it
 * (`emptiedBy`), and every change that alters a gallery (an addition, an edit, a pending edit
 * and its closing, on the website, the API or the CLI) publishes a new mark before it returns
 * (this process's website empties it at once, before publishing). An entry also lives at most
 * `maxAgeMs`, which bounds how late a change whose process died between its commit and its
 * publishing shows. With no catalogue watch in this process (`sleeve serve --only auth`)
 * nothing is kept: `follow` turns it on.
 *
 * Bounded in entries and in bytes, the oldest first. Holds nothing of a signed-in viewer: a
 * request carrying a session cookie is never answered here and never fills it.
 */
export interface VisitorPageLimits {
  maxEntries: number;
  maxBytes: number;
  maxAgeMs: number;
}

interface Entry {
  /** Flat header lists for writeHead, their last value the request's id (set per request). */
  plain: string[];
  gzip: string[];
  /** The page as text (written with the head in one string) and gzipped. */
  text: string;
  gzipped: Buffer;
  route: string;
  madeAt: number;
  bytes: number;
}

/** Whether an Accept-Encoding header accepts gzip (a q of 0 refuses it; `*` stands for it). */
function acceptsGzip(header: string | undefined): boolean {
  if (header === undefined || header === '') return false;
  let star: boolean | undefined;
  for (const part of header.split(',')) {
    const [coding = '', ...params] = part.split(';');
    const name = coding.trim().toLowerCase();
    if (name !== 'gzip' && name !== 'x-gzip' && name !== '*') continue;
    const q = params.map((p) => p.trim()).find((p) => p.toLowerCase().startsWith('q='));
    const ok = q === undefined || Number(q.slice(2)) > 0;
    if (name === '*') star = ok;
    else return ok;
  }
  return star === true;
}

export class VisitorPages implements FollowingCache {
  /** What empties it (cluster/cache-freshness.ts); a refreshed listing forgets the pages naming its release, and every group's. */
  readonly emptiedBy: readonly FreshnessEvent[] = ['catalogue-changed', 'watch-blind', 'listing-refreshed', 'website-changed'];
  private readonly entries = new Map<string, Entry>();
  private held = 0;
  private on = false;
  /** Moves at every `clear`: a page made from a read before it is not kept. */
  generation = 0;

  constructor(
    private readonly clock: Clock,
    private readonly limits: VisitorPageLimits = { maxEntries: 2000, maxBytes: 16 * 1024 * 1024, maxAgeMs: 1000 },
  ) {}

  /** Starts keeping pages: called once the catalogue watch empties this cache on every change. */
  follow(): void {
    this.on = true;
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
    this.held = 0;
  }

  /** A release's listing refreshed with new measures: the pages naming it, and every group's (cluster/listing-refresh.ts). */
  forgetRelease(gid: string): void {
    this.generation++;
    for (const [k, e] of this.entries) {
      if (!k.includes(gid) && !k.includes('release-group')) continue;
      this.entries.delete(k);
      this.held -= e.bytes;
    }
  }

  /**
   * Keeps a visitor's page for `target` (the request target it answered), with its headers
   * (the listener's and the page's, without X-Request-Id and Content-Length), if no change
   * came between the read it was made from (`generation` then) and now.
   */
  keep(target: string, route: string, headers: Record<string, string>, page: Buffer, generation: number): void {
    if (!this.on || generation !== this.generation || target.includes('?')) return;
    const gzipped = gzipSync(page, { level: 9 });
    const bytes = 2 * target.length + 2 * page.length + gzipped.length + 1024;
    if (bytes > this.limits.maxBytes) return;
    const flat = Object.entries(headers).flat();
    const old = this.entries.get(target);
    if (old !== undefined) {
      this.entries.delete(target);
      this.held -= old.bytes;
    }
    for (const [k, e] of this.entries) {
      if (this.held + bytes <= this.limits.maxBytes && this.entries.size < this.limits.maxEntries) break;
      this.entries.delete(k);
      this.held -= e.bytes;
    }
    this.entries.set(target, {
      plain: [...flat, 'vary', 'accept-encoding', 'content-length', String(page.length), 'x-request-id', ''],
      gzip: [...flat, 'vary', 'accept-encoding', 'content-encoding', 'gzip', 'content-length', String(gzipped.length), 'x-request-id', ''],
      text: page.toString('utf8'),
      gzipped,
      route,
      madeAt: this.clock.now(),
      bytes,
    });
    this.held += bytes;
  }

  /**
   * Answers a GET that reached the listener over HTTPS (the caller checks both) from a kept
   * page, if there is one for its target and the visitor is anonymous; returns the route
   * label it answered, or undefined to let the router answer.
   */
  answer(req: PlainRequest, res: PlainReply, requestId: string): string | undefined {
    if (this.entries.size === 0) return undefined;
    const entry = this.entries.get(req.url ?? '');
    if (entry === undefined) return undefined;
    const { headers } = req;
    if ((headers.cookie !== undefined && headers.cookie.includes(`${SESSION_COOKIE}=`)) || headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined) return undefined;
    if (this.clock.now() - entry.madeAt >= this.limits.maxAgeMs) {
      this.entries.delete(req.url ?? '');
      this.held -= entry.bytes;
      return undefined;
    }
    const gzip = acceptsGzip(headers['accept-encoding']);
    const list = gzip ? entry.gzip : entry.plain;
    // writeHead copies the list into the head at once, so one list serves every request.
    list[list.length - 1] = requestId;
    res.writeHead(200, list);
    res.end(gzip ? entry.gzipped : entry.text);
    return entry.route;
  }

  get size(): number {
    return this.entries.size;
  }
}
