import type { Metadata, Sharp, SharpOptions } from 'sharp';
import { invalidInput } from '../../shared/errors.js';
import { readImageHeader } from './image-header.js';
import { THUMBNAIL_SIZES, type ThumbnailSize } from '../files/keys.js';

type SharpFactory = (input?: Buffer, options?: SharpOptions) => Sharp;
let loaded: Promise<SharpFactory> | undefined;

/**
 * The only place sharp is loaded: on first use, so commands and servers that make or measure no
 * image do not pay for it (libvips: ~25 MB of a server's resident memory).
 */
export function sharpModule(): Promise<SharpFactory> {
  loaded ??= import('sharp').then(({ default: sharp }) => {
    sharp.cache(false);
    return sharp as unknown as SharpFactory;
  });
  return loaded;
}

const ACCEPTED = {
  jpeg: { mime: 'image/jpeg', suffix: 'jpg' },
  png: { mime: 'image/png', suffix: 'png' },
  gif: { mime: 'image/gif', suffix: 'gif' },
} as const;

export interface ImageFacts {
  mime: string;
  suffix: string;
  width: number;
  height: number;
}

export interface ProcessedImage extends ImageFacts {
  thumbnails: Map<ThumbnailSize, Buffer>;
}

const JPEG_QUALITY = 85;

/**
 * Checks that `bytes` is a whole JPEG, PNG or GIF within the pixel limit, and makes
 * its 250/500/1200 px JPEG thumbnails (longest side, aspect kept, never upscaled).
 * Throws an INVALID_INPUT AppError with a message fit for the user otherwise.
 */
export async function processImage(bytes: Buffer, maxPixels: number): Promise<ProcessedImage> {
  const { sharp, facts } = await inspectImage(bytes, maxPixels);
  try {
    return { ...facts, thumbnails: await makeThumbnails(sharp, bytes, maxPixels) };
  } catch (err) {
    throw invalidInput(`the image could not be decoded (truncated or corrupt): ${(err as Error).message}`);
  }
}

/**
 * Checks that `bytes` is a whole JPEG, PNG or GIF within the pixel limit by decoding all of
 * it (a file fetched from an upstream archive, cover-art/upstream/upstream.ts); the same errors as processImage.
 * With `decode` false, only its header is read (format and size): for bytes whose md5 the
 * upstream vouches for, which a decode would only check against themselves.
 */
export async function verifyImage(bytes: Buffer, maxPixels: number, decode = true): Promise<ImageFacts> {
  if (!decode) {
    // Read in plain code where it can be (width and height as stored); sharp reads the rest and words the errors.
    const header = readImageHeader(bytes);
    if (header !== undefined && header.width * header.height <= maxPixels) {
      const { mime, suffix } = ACCEPTED[header.format];
      return { mime, suffix, width: header.width, height: header.height };
    }
  }
  const { sharp, facts } = await inspectImage(bytes, maxPixels);
  if (!decode) return facts;
  try {
    // Every pixel decoded (a truncated or corrupt file fails), none kept.
    await sharp(bytes, { limitInputPixels: maxPixels, failOn: 'truncated' }).stats();
  } catch (err) {
    throw invalidInput(`the image could not be decoded (truncated or corrupt): ${(err as Error).message}`);
  }
  return facts;
}

/** The format and size of an image sleeve accepts, from its header; INVALID_INPUT for anything else. */
async function inspectImage(bytes: Buffer, maxPixels: number): Promise<{ sharp: SharpFactory; facts: ImageFacts }> {
  if (bytes.subarray(0, 5).toString('latin1') === '%PDF-') {
    throw invalidInput('PDF files are not supported yet: sleeve accepts JPEG, PNG and GIF images');
  }
  const sharp = await sharpModule();
  let meta: Metadata;
  try {
    meta = await sharp(bytes, { limitInputPixels: false }).metadata();
  } catch {
    throw invalidInput('not an image sleeve can read: it accepts JPEG, PNG and GIF images');
  }
  const format = meta.format as string | undefined;
  const accepted = format !== undefined && format in ACCEPTED ? ACCEPTED[format as keyof typeof ACCEPTED] : undefined;
  if (accepted === undefined) {
    throw invalidInput(`unsupported image format ${format ?? 'unknown'}: sleeve accepts JPEG, PNG and GIF images`);
  }
  const width = meta.autoOrient?.width ?? meta.width;
  const height = meta.autoOrient?.height ?? meta.height;
  if (!width || !height) throw invalidInput('the image has no dimensions');
  if (width * height > maxPixels) {
    throw invalidInput(`image of ${width}×${height} pixels exceeds the limit of ${maxPixels} pixels (SLEEVE_UPLOAD_MAX_PIXELS)`);
  }
  return { sharp, facts: { mime: accepted.mime, suffix: accepted.suffix, width, height } };
}

/**
 * Decodes once to at most 1200 px, encodes that as the 1200 thumbnail and scales the
 * same pixels down for 500 and 250, instead of decoding the original three times.
 */
async function makeThumbnails(sharp: SharpFactory, bytes: Buffer, maxPixels: number): Promise<Map<ThumbnailSize, Buffer>> {
  const largest = THUMBNAIL_SIZES[THUMBNAIL_SIZES.length - 1] as ThumbnailSize;
  const { data, info } = await sharp(bytes, { limitInputPixels: maxPixels, failOn: 'truncated' })
    .rotate()
    .resize(largest, largest, { fit: 'inside', withoutEnlargement: true })
    .flatten({ background: '#ffffff' })
    .toColourspace('srgb')
    .raw()
    .toBuffer({ resolveWithObject: true });
  const raw = { raw: { width: info.width, height: info.height, channels: info.channels } };
  const out = await Promise.all(
    THUMBNAIL_SIZES.map((size) => {
      let pipeline = sharp(data, raw);
      if (size !== largest) pipeline = pipeline.resize(size, size, { fit: 'inside', withoutEnlargement: true });
      return pipeline.jpeg({ quality: JPEG_QUALITY }).toBuffer();
    }),
  );
  return new Map(THUMBNAIL_SIZES.map((size, i) => [size, out[i] as Buffer]));
}

/** Renders an SVG document to JPEG; used for the generated demo covers. */
export async function renderSvgToJpeg(svg: string): Promise<Buffer> {
  const sharp = await sharpModule();
  return sharp(Buffer.from(svg)).jpeg({ quality: 90 }).toBuffer();
}
