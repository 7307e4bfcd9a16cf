import { BACK_TYPE, FRONT_TYPE, type ImageWithTypes } from '../catalogue/repo.js';

/** One entry of a listing, with the keys of a Cover Art Archive index.json entry (docs/interface.md, Image entry). */
export interface ListingImage {
  approved: boolean;
  back: boolean;
  comment: string;
  edit: number;
  front: boolean;
  id: string;
  image: string;
  thumbnails: { '1200': string; '250': string; '500': string; large: string; small: string };
  types: string[];
  /*
   * sleeve's additive fields (docs/interface.md, "Image entry"), each present only when known
   * (sleeve has measured the stored file) and never with SLEEVE_LISTING_FIELDS=caa.
   */
  /** The original as displayed: after EXIF orientation 5–8 swaps width and height. */
  width?: number;
  height?: number;
  /** Bytes of the original. */
  size?: number;
  mime_type?: string;
  /** The thumbnails that exist, by nominal size: a small original's are smaller (never upscaled). */
  thumbnail_dimensions?: Record<string, { width: number; height: number }>;
  /** The formats its thumbnails are answered in (SLEEVE_THUMBNAIL_FORMATS), when more than JPEG; never of a PDF. */
  thumbnail_formats?: string[];
}

export interface Listing {
  images: ListingImage[];
  release: string;
}

export interface ListingUrls {
  /** {base_url}: the URLs in a listing point back at the cover art service. */
  baseUrl: string;
  musicBrainzUrl: string;
  /**
   * SLEEVE_LISTING_FIELDS: `caa` writes the real indexer's entries byte for byte; `full` (the
   * default, also when absent) adds what sleeve measured of the files.
   */
  fields?: ListingFields;
  /** SLEEVE_THUMBNAIL_FORMATS when more than JPEG: named in each image's entry (`full` only). */
  thumbnailFormats?: readonly string[] | undefined;
  /** SLEEVE_EVENT_BASE_URL: where an event's listing points (absent: baseUrl). */
  eventBaseUrl?: string;
}

export type ListingFields = 'full' | 'caa';

/**
 * The listing of a release from its images (in ordering order). Every image is listed; `front`
 * and `back` mark the covers the API serves (the first image typed Front or Back, and only
 * among approved images when `approvedOnly`: repo.ts, coversNeedApproval).
 */
export function buildListing(urls: ListingUrls, mbid: string, images: ImageWithTypes[], approvedOnly: boolean): Listing {
  const cover = (type: number) => images.find((i) => i.typeIds.includes(type) && (!approvedOnly || i.approved === 1));
  const front = cover(FRONT_TYPE);
  const back = cover(BACK_TYPE);
  return {
    images: images.map((i) => ({ ...entryOf(urls, 'release', mbid, i, front), back: i === back })),
    release: `${urls.musicBrainzUrl}/release/${mbid}`,
  };
}

/** An event's image entry: a release's without `back` (the Event Art Archive's indexer writes none). */
export type EventListingImage = Omit<ListingImage, 'back'>;

export interface EventListing {
  images: EventListingImage[];
  event: string;
}

/**
 * The listing of an event (the Event Art Archive's index.json): `front` marks the first image
 * typed Poster (among approved ones when `approvedOnly`), URLs are under `/event/{mbid}/`, and
 * the link field is `event`.
 */
export function buildEventListing(urls: ListingUrls, mbid: string, images: ImageWithTypes[], approvedOnly: boolean, posterType: number): EventListing {
  // As the event art archive's index_listing view chooses is_front: never a PDF.
  const front = images.find((i) => i.typeIds.includes(posterType) && i.mime_type !== 'application/pdf' && (!approvedOnly || i.approved === 1));
  return {
    images: images.map((i) => entryOf(urls, 'event', mbid, i, front)),
    event: `${urls.musicBrainzUrl}/event/${mbid}`,
  };
}

function entryOf(urls: ListingUrls, entity: 'release' | 'event', mbid: string, i: ImageWithTypes, front: ImageWithTypes | undefined): EventListingImage {
  const base = entity === 'event' ? (urls.eventBaseUrl ?? urls.baseUrl) : urls.baseUrl;
  const prefix = `${base}/${entity}/${mbid}/`;
  const thumb = (size: number) => `${prefix}${i.id}-${size}.jpg`;
  return {
    approved: i.approved === 1,
    comment: i.comment,
    edit: i.edit,
    front: i === front,
    id: String(i.id),
    image: `${prefix}${i.id}.${i.suffix}`,
    thumbnails: { '1200': thumb(1200), '250': thumb(250), '500': thumb(500), large: thumb(500), small: thumb(250) },
    types: i.types,
    ...(urls.fields === 'caa' ? {} : measuredFields(i)),
    ...(urls.fields === 'caa' || urls.thumbnailFormats === undefined || urls.thumbnailFormats.length < 2 || i.suffix === 'pdf' ? {} : { thumbnail_formats: [...urls.thumbnailFormats] }),
  };
}

/** The additive fields of an image sleeve measured (none of one it did not). */
function measuredFields(i: ImageWithTypes): Partial<ListingImage> {
  const out: Partial<ListingImage> = {};
  if (i.width != null && i.height != null) {
    out.width = i.width;
    out.height = i.height;
  }
  if (i.stored_size != null) {
    out.size = Number(i.stored_size);
    out.mime_type = i.mime_type;
  }
  const thumbs = parseThumbnailDimensions(i.thumbnail_dimensions);
  if (thumbs !== undefined) out.thumbnail_dimensions = thumbs;
  return out;
}

/** The thumbnail_dimensions column (JSON); undefined when none were measured or it does not parse. */
export function parseThumbnailDimensions(text: string | null | undefined): Record<string, { width: number; height: number }> | undefined {
  if (text == null) return undefined;
  try {
    const value = JSON.parse(text) as Record<string, { width: number; height: number }>;
    return Object.keys(value).length > 0 ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Serializes as the current indexer does (Python `json.dumps(sort_keys=True)`):
 * keys sorted, `", "` and `": "` separators, one line, non-ASCII as \u escapes.
 */
export function serializeListing(value: unknown): string {
  return pythonJson(value);
}

function pythonJson(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(', ')}]`;
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    case 'number':
    case 'boolean':
      return JSON.stringify(value);
    case 'object': {
      const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return `{${entries.map(([k, v]) => `${pythonJson(k)}: ${pythonJson(v)}`).join(', ')}}`;
    }
    default:
      throw new TypeError(`cannot serialize ${typeof value}`);
  }
}
