import { buildListing, imageKey, type ImageWithTypes, type ListingImage, type ListingUrls } from '../cover-art/index.js';

/** Where the pages find images: the files themselves (as the API's redirects point) and the listing's public URLs. */
export interface ImageUrls {
  /** SLEEVE_IMAGE_BASE_URL: the files, without a redirect (what <img> loads). */
  imageBaseUrl: string;
  listing: ListingUrls;
}

/** A file's URL: the original, or a thumbnail of `size`. */
export function fileUrl(urls: ImageUrls, release: string, image: { id: number; suffix: string }, size?: 250 | 500 | 1200): string {
  return `${urls.imageBaseUrl}/${imageKey(release, image.id, image.suffix, size)}`;
}

/** srcset and src of an image's thumbnails, for <img>. */
export function sources(urls: ImageUrls, release: string, image: { id: number; suffix: string }): { src: string; srcset: string } {
  const at = (size: 250 | 500 | 1200) => fileUrl(urls, release, image, size);
  return { src: at(500), srcset: `${at(250)} 250w, ${at(500)} 500w, ${at(1200)} 1200w` };
}

/** The listing entries (as the cover art API serves them: covers approved only when `approvedOnly`) beside the rows they came from. */
export function entries(urls: ImageUrls, release: string, images: ImageWithTypes[], approvedOnly: boolean): { row: ImageWithTypes; entry: ListingImage }[] {
  const listing = buildListing(urls.listing, release, images, approvedOnly);
  return images.map((row, i) => ({ row, entry: listing.images[i] as ListingImage }));
}
