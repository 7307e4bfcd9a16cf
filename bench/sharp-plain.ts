/**
 * The plain sharp script `art add` is compared with: reads an image and writes its
 * 250/500/1200 px JPEG thumbnails (quality 85) into a directory.
 * Usage: node sharp-plain.js INPUT OUT_DIR
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { plainThumbnails, SIZES } from './lib/plain-sharp.js';

const [input = '', outDir = '.'] = process.argv.slice(2);
const thumbs = await plainThumbnails(await readFile(input));
await Promise.all(thumbs.map((bytes, i) => writeFile(path.join(outDir, `thumb${SIZES[i]}.jpg`), bytes)));
