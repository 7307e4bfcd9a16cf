import type { ApiResponse } from './responses.js';

/**
 * Finished API responses by request target, valid until the catalogue changes.
 * Bounded: the oldest entries go first. `generation` lets a request that started
 * before a change avoid storing an answer computed from the old catalogue.
 */
export class ResponseCache {
  private readonly entries = new Map<string, ApiResponse>();
  private readonly max: number;
  generation = 0;

  constructor(maxEntries: number) {
    this.max = maxEntries;
  }

  get(url: string): ApiResponse | undefined {
    return this.entries.get(url);
  }

  set(url: string, response: ApiResponse, generation: number): void {
    if (this.max === 0 || !response.cacheable || generation !== this.generation) return;
    if (this.entries.size >= this.max) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(url, response);
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
