/**
 * What `art add` is compared with: the three CAA thumbnails made "the plain way" with sharp
 * alone. bench/ingest.ts calls plainThumbnails in its own process, and runs this file as a
 * script for the whole-process comparison:
 *   node sharp-plain.js INPUT OUT_DIR
 * which reads an image and writes its 250/500/1200 px JPEG thumbnails (quality 85) into a directory.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import sharp from 'sharp';

export const SIZES = [250, 500, 1200] as const;
export const QUALITY = 85;

/** One pipeline per size straight from the original (longest side, aspect kept, never upscaled), all three in flight at once. */
export function plainThumbnails(bytes: Buffer): Promise<Buffer[]> {
  return Promise.all(
    SIZES.map((size) => sharp(bytes).resize(size, size, { fit: 'inside', withoutEnlargement: true }).jpeg({ quality: QUALITY }).toBuffer()),
  );
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [input = '', outDir = '.'] = process.argv.slice(2);
  const thumbs = await plainThumbnails(await readFile(input));
  await Promise.all(thumbs.map((bytes, i) => writeFile(path.join(outDir, `thumb${SIZES[i]}.jpg`), bytes)));
}
