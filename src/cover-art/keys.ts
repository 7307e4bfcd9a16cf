/*
 * Storage keys and public URLs, in archive.org's download layout (docs/file-serving.md, "The built-in file server"):
 *   mbid-{m}/index.json, mbid-{m}/mbid-{m}-{id}.{suffix}, mbid-{m}/mbid-{m}-{id}_thumb{size}.jpg
 */

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

const IMAGE_FILE_RE = /^mbid-([0-9a-f-]{36})\/mbid-([0-9a-f-]{36})-(\d{1,19})(?:_thumb(250|500|1200)\.jpg|\.(jpg|png|gif|pdf))$/;

/** IMAGE_FILE_RE with the second MBID matched as the first: a test, no match to make. */
const IMAGE_KEY_RE = /^mbid-([0-9a-f-]{36})\/mbid-\1-\d{1,19}(?:_thumb(?:250|500|1200)\.jpg|\.(?:jpg|png|gif|pdf))$/;

/** Whether `key` is an image key of the layout (parseImageKey would parse it), with nothing made for the answer. */
export function isImageKey(key: string): boolean {
  return IMAGE_KEY_RE.test(key);
}

/** Parses an image key of the layout; undefined for index.json and anything else. */
export function parseImageKey(key: string): { mbid: string; id: number; size: ThumbnailSize | undefined } | undefined {
  const m = IMAGE_FILE_RE.exec(key);
  if (m === null || m[1] !== m[2]) return undefined;
  return { mbid: m[1] as string, id: Number(m[3]), size: m[4] === undefined ? undefined : (Number(m[4]) as ThumbnailSize) };
}
