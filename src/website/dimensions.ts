import { sharpModule } from '../cover-art/images/thumbnails.js';
import type { ObjectStore } from '../storage/index.js';

/** Bytes read from the start of an original to find its size: the header is within them for the formats accepted. */
const HEAD_BYTES = 256 * 1024;

export interface Dimensions {
  width: number;
  height: number;
}

/**
 * Width and height of originals, read from the start of the stored file (sharp reads the
 * header only) the first time a page shows them, then kept: an image's file never changes
 * under its id. Bounded: the oldest entries go first. Unknown (undefined) when the file is
 * missing or its header lies beyond the first 256 kB (docs/decisions.md, "Cover art pages").
 */
export class DimensionCache {
  private readonly known = new Map<string, Dimensions | null>();

  constructor(
    private readonly store: ObjectStore,
    private readonly maxEntries = 20_000,
  ) {}

  async of(key: string): Promise<Dimensions | undefined> {
    const hit = this.known.get(key);
    if (hit !== undefined) return hit ?? undefined;
    const found = await this.read(key);
    // A missing file may yet arrive (a store catching up): only what was read is kept.
    if (found !== undefined) {
      if (this.known.size >= this.maxEntries) this.known.delete(this.known.keys().next().value as string);
      this.known.set(key, found);
    }
    return found ?? undefined;
  }

  /** The dimensions, null when the file says none, undefined when it could not be read. */
  private async read(key: string): Promise<Dimensions | null | undefined> {
    let object;
    try {
      object = await this.store.get(key, { start: 0, end: HEAD_BYTES - 1 });
    } catch {
      return undefined;
    }
    if (object === undefined) return undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of object.body) {
        chunks.push(chunk as Buffer);
        size += (chunk as Buffer).length;
        if (size >= HEAD_BYTES) break;
      }
    } catch {
      return undefined;
    } finally {
      object.body.destroy();
    }
    try {
      const sharp = await sharpModule();
      const meta = await sharp(Buffer.concat(chunks)).metadata();
      if (meta.width === undefined || meta.height === undefined) return null;
      // EXIF orientations 5–8 turn the picture a quarter: show the size as seen.
      const turned = meta.orientation !== undefined && meta.orientation >= 5;
      return turned ? { width: meta.height, height: meta.width } : { width: meta.width, height: meta.height };
    } catch {
      return null;
    }
  }
}
