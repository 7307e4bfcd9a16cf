/*
 * Storage keys and public URLs, in archive.org's download layout (docs/file-serving.md, "The built-in file server"):
 *   mbid-{m}/index.json, mbid-{m}/mbid-{m}-{id}.{suffix}, mbid-{m}/mbid-{m}-{id}_thumb{size}.jpg
 */
import { ID_PATTERN, parseId } from './ids.js';

export const THUMBNAIL_SIZES = [250, 500, 1200] as const;
export type ThumbnailSize = (typeof THUMBNAIL_SIZES)[number];

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

/** The key of an image or of its thumbnail. */
export function imageKey(mbid: string, id: number, suffix: string, size: ThumbnailSize | undefined): string {
  return size === undefined ? originalKey(mbid, id, suffix) : thumbnailKey(mbid, id, size);
}

// Ids only as the catalogue writes them (ids.ts, ID_PATTERN): `-0101`, `-00101`… name no file.
const IMAGE_FILE_RE = new RegExp(`^mbid-([0-9a-f-]{36})/mbid-([0-9a-f-]{36})-(${ID_PATTERN})(?:_thumb(250|500|1200)\\.jpg|\\.(jpg|png|gif|pdf))$`);

/** IMAGE_FILE_RE with the second MBID matched as the first: a test, no match to make. */
const IMAGE_KEY_RE = new RegExp(`^mbid-([0-9a-f-]{36})/mbid-\\1-${ID_PATTERN}(?:_thumb(?:250|500|1200)\\.jpg|\\.(?:jpg|png|gif|pdf))$`);

/** Where an image key's id starts (after `mbid-{m}/mbid-{m}-`). */
const ID_AT = 84;

/** Whether `key` is an image key of the layout (parseImageKey would parse it), with nothing made for the answer. */
export function isImageKey(key: string): boolean {
  if (!IMAGE_KEY_RE.test(key)) return false;
  // Only an id of 16 digits may be past 2^53: that one is parsed to know.
  const c = key.charCodeAt(ID_AT + 15);
  return !(c >= 48 && c <= 57) || parseImageKey(key) !== undefined;
}

/** Parses an image key of the layout; undefined for index.json and anything else. */
export function parseImageKey(key: string): { mbid: string; id: number; size: ThumbnailSize | undefined } | undefined {
  const m = IMAGE_FILE_RE.exec(key);
  if (m === null || m[1] !== m[2]) return undefined;
  const id = parseId(m[3] as string);
  if (id === undefined) return undefined;
  return { mbid: m[1] as string, id, size: m[4] === undefined ? undefined : (Number(m[4]) as ThumbnailSize) };
}

/** The layout's shape with an id of any digits (a test). */
const ANY_ID_KEY_RE = /^mbid-([0-9a-f-]{36})\/mbid-\1-[0-9]+(?:_thumb(?:250|500|1200)\.jpg|\.(?:jpg|png|gif|pdf))$/;

/**
 * Whether `key` has the shape of an image key but spells its id otherwise than the catalogue
 * does (`-0101`, an id past 2^53): no file of sleeve's, though an older sleeve's pull-through
 * made such files (`sleeve art reindex` removes them).
 */
export function isMisspelledImageKey(key: string): boolean {
  return ANY_ID_KEY_RE.test(key) && parseImageKey(key) === undefined;
}
