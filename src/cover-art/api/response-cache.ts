import type { FollowingCache, FreshnessEvent } from '../../cluster/cache-freshness.js';
import type { ApiResponse } from './responses.js';

/**
 * What an entry costs besides its key, body and header text: the Map slot, the response
 * and header objects, the Buffer, and the wire form the front door prepares once per
 * response (wire.ts). With it, the estimate below follows the heap: 20,000 cached
 * thumbnail redirects (wire forms made) took 1,461 bytes of heap each; estimated 1,428.
 */
const ENTRY_OVERHEAD_BYTES = 512;

export interface ResponseCacheLimits {
  /** Most bytes of answers kept (estimated as below); 0 turns the cache off. */
  maxBytes: number;
  /** Most answers kept, if limited by count too (the deprecated SLEEVE_RESPONSE_CACHE); 0 turns the cache off. */
  maxEntries?: number | undefined;
}

interface Entry {
  response: ApiResponse;
  bytes: number;
}

/** Heap an entry holds: its key (two bytes a character at worst), the body twice (bytes and wire text), headers, overhead. */
function entryBytes(key: string, response: ApiResponse): number {
  let headers = 0;
  for (const name in response.headers) headers += name.length + (response.headers[name] as string).length;
  return ENTRY_OVERHEAD_BYTES + 2 * key.length + 2 * response.body.length + 2 * headers;
}

/**
 * Finished API responses by what decides them (`answerKey` of the request target: the
 * path as the API parses it, so query strings and spellings of one path share an entry),
 * valid until the catalogue changes. Bounded in bytes: the oldest entries go first.
 * `generation` lets a request that started before a change avoid storing an answer
 * computed from the old catalogue.
 */
export class ResponseCache implements FollowingCache {
  /** What empties it (cluster/cache-freshness.ts); a refreshed listing forgets the answers that show it. */
  readonly emptiedBy: readonly FreshnessEvent[] = ['catalogue-changed', 'watch-blind', 'listing-refreshed'];
  private readonly entries = new Map<string, Entry>();
  private readonly maxBytes: number;
  private readonly maxEntries: number;
  private held = 0;
  generation = 0;

  constructor(limits: ResponseCacheLimits) {
    this.maxBytes = limits.maxBytes;
    this.maxEntries = limits.maxEntries ?? Number.MAX_SAFE_INTEGER;
  }

  get(key: string): ApiResponse | undefined {
    return this.entries.get(key)?.response;
  }

  set(key: string, response: ApiResponse, generation: number): void {
    if (!response.cacheable || generation !== this.generation || this.maxEntries === 0) return;
    const bytes = entryBytes(key, response);
    if (bytes > this.maxBytes) return;
    const old = this.entries.get(key);
    if (old !== undefined) {
      this.entries.delete(key);
      this.held -= old.bytes;
    }
    // Oldest first: a Map iterates in insertion order.
    for (const [k, e] of this.entries) {
      if (this.held + bytes <= this.maxBytes && this.entries.size < this.maxEntries) break;
      this.entries.delete(k);
      this.held -= e.bytes;
    }
    this.entries.set(key, { response, bytes });
    this.held += bytes;
  }

  /**
   * Forgets the answers that show `gid`'s listing (a release group's listing: the release's own
   * redirects to index.json, which the file cache forgets). Those answered meanwhile from the
   * old listing are not kept: the generation moves too.
   */
  forgetRelease(gid: string): void {
    this.generation++;
    for (const [key, e] of this.entries) {
      if (e.response.listingOf !== gid) continue;
      this.entries.delete(key);
      this.held -= e.bytes;
    }
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
    this.held = 0;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Estimated bytes held (what SLEEVE_RESPONSE_CACHE_BYTES bounds). */
  get bytes(): number {
    return this.held;
  }
}
