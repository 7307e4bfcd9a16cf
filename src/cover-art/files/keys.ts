/*
 * Storage keys and public URLs, in archive.org's download layout (docs/file-serving.md, "The built-in file server"):
 *   mbid-{m}/index.json, mbid-{m}/mbid-{m}-{id}.{suffix}, mbid-{m}/mbid-{m}-{id}_thumb{size}.jpg
 * and the thumbnails made on demand (cover-art/files/derivatives.ts): …_thumb{N}.jpg|webp|avif.
 */
import { ID_PATTERN, parseId } from '../ids.js';

export const THUMBNAIL_SIZES = [250, 500, 1200] as const;
export type ThumbnailSize = (typeof THUMBNAIL_SIZES)[number];

/** Formats a thumbnail can be made in (SLEEVE_THUMBNAIL_FORMATS), and the suffix of each. */
export type ThumbnailFormat = 'jpeg' | 'webp' | 'avif';
const FORMAT_SUFFIX: Readonly<Record<ThumbnailFormat, string>> = { jpeg: 'jpg', webp: 'webp', avif: 'avif' };
const FORMAT_OF_SUFFIX: Readonly<Record<string, ThumbnailFormat>> = { jpg: 'jpeg', webp: 'webp', avif: 'avif' };

/** Whether `size` is one of the interface's three. */
export function isInterfaceSize(size: number): size is ThumbnailSize {
  return size === 250 || size === 500 || size === 1200;
}

export function folderKey(mbid: string): string {
  return `mbid-${mbid}`;
}

export function indexKey(mbid: string): string {
  return `mbid-${mbid}/index.json`;
}

export function originalKey(mbid: string, id: number, suffix: string): string {
  return `mbid-${mbid}/mbid-${mbid}-${id}.${suffix}`;
}

export function thumbnailKey(mbid: string, id: number, size: ThumbnailSize): string {
  return `mbid-${mbid}/mbid-${mbid}-${id}_thumb${size}.jpg`;
}

/** The key of a thumbnail of any size and format (a size or format made on demand). */
function derivativeKey(mbid: string, id: number, size: number, format: ThumbnailFormat): string {
  return `mbid-${mbid}/mbid-${mbid}-${id}_thumb${size}.${FORMAT_SUFFIX[format]}`;
}

/** The key of an image or of its thumbnail (JPEG unless `format` says otherwise). */
export function imageKey(mbid: string, id: number, suffix: string, size: number | undefined, format: ThumbnailFormat = 'jpeg'): string {
  return size === undefined ? originalKey(mbid, id, suffix) : derivativeKey(mbid, id, size, format);
}

/** The prefix of every thumbnail key of an image (the made ones are listed by it for removal). */
export function thumbnailPrefix(mbid: string, id: number): string {
  return `mbid-${mbid}/mbid-${mbid}-${id}_thumb`;
}

// Ids only as the catalogue writes them (ids.ts, ID_PATTERN): `-0101`, `-00101`… name no file.
// A thumbnail's size in one spelling (no leading zero), at most 10000 (the largest SLEEVE_THUMBNAIL_SIZES takes).
const IMAGE_FILE_RE = new RegExp(`^mbid-([0-9a-f-]{36})/mbid-([0-9a-f-]{36})-(${ID_PATTERN})(?:_thumb([1-9][0-9]{0,3}|10000)\\.(jpg|webp|avif)|\\.(jpg|png|gif|pdf))$`);

/** IMAGE_FILE_RE with the second MBID matched as the first: a test, no match to make. */
const IMAGE_KEY_RE = new RegExp(`^mbid-([0-9a-f-]{36})/mbid-\\1-${ID_PATTERN}(?:_thumb(?:[1-9][0-9]{0,3}|10000)\\.(?:jpg|webp|avif)|\\.(?:jpg|png|gif|pdf))$`);

/** Where an image key's id starts (after `mbid-{m}/mbid-{m}-`). */
const ID_AT = 84;

/** Whether `key` is an image key of the layout (parseImageKey would parse it), with nothing made for the answer. */
export function isImageKey(key: string): boolean {
  if (!IMAGE_KEY_RE.test(key)) return false;
  // Only an id of 16 digits may be past 2^53: that one is parsed to know.
  const c = key.charCodeAt(ID_AT + 15);
  return !(c >= 48 && c <= 57) || parseImageKey(key) !== undefined;
}

/** An image key parsed: a thumbnail's size and format, none for the original. */
export interface ImageKeyParts {
  mbid: string;
  id: number;
  size: number | undefined;
  format: ThumbnailFormat | undefined;
}

/** Parses an image key of the layout; undefined for index.json and anything else. */
export function parseImageKey(key: string): ImageKeyParts | undefined {
  const m = IMAGE_FILE_RE.exec(key);
  if (m === null || m[1] !== m[2]) return undefined;
  const id = parseId(m[3] as string);
  if (id === undefined) return undefined;
  const size = m[4] === undefined ? undefined : Number(m[4]);
  return { mbid: m[1] as string, id, size, format: m[5] === undefined ? undefined : FORMAT_OF_SUFFIX[m[5]] };
}

/** The layout's shape with an id of any digits (a test). */
const ANY_ID_KEY_RE = /^mbid-([0-9a-f-]{36})\/mbid-\1-[0-9]+(?:_thumb(?:[1-9][0-9]{0,3}|10000)\.(?:jpg|webp|avif)|\.(?:jpg|png|gif|pdf))$/;

/**
 * Whether `key` has the shape of an image key but spells its id otherwise than the catalogue
 * does (`-0101`, an id past 2^53): no file of sleeve's, though an older sleeve's pull-through
 * made such files (`sleeve art reindex` removes them).
 */
export function isMisspelledImageKey(key: string): boolean {
  return ANY_ID_KEY_RE.test(key) && parseImageKey(key) === undefined;
}
