import { imageKey, type ListingUrls } from '../cover-art/index.js';

/** Where the pages find images: the files themselves (as the API's redirects point) and the listing's public URLs. */
export interface ImageUrls {
  /** SLEEVE_IMAGE_BASE_URL: the files, without a redirect (what <img> loads). */
  imageBaseUrl: string;
  listing: ListingUrls;
}

/** A file's URL: the original, or a thumbnail of `size`. */
export function fileUrl(urls: ImageUrls, owner: string, image: { id: number; suffix: string }, size?: 250 | 500 | 1200): string {
  return `${urls.imageBaseUrl}/${imageKey(owner, image.id, image.suffix, size)}`;
}

/** srcset and src of an image's thumbnails, for <img>. */
export function sources(urls: ImageUrls, owner: string, image: { id: number; suffix: string }): { src: string; srcset: string } {
  const at = (size: 250 | 500 | 1200) => fileUrl(urls, owner, image, size);
  return { src: at(500), srcset: `${at(250)} 250w, ${at(500)} 500w, ${at(1200)} 1200w` };
}
