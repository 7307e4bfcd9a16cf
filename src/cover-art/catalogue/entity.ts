/*
 * What a change to art is made on: a release (the Cover Art Archive) or an event (the Event Art
 * Archive; docs/decisions.md, "Events beside releases"). Their tables are shaped alike
 * (migration 20261207T0500: event_art is cover_art with `event` for `release`), so the changes,
 * their edits and their approval (art-changes.ts, approval.ts) are written once and given one
 * of these.
 */
import type { IndexDeps } from '../deps.js';
import { findEvent, findEventImage, listEventImages, POSTER_TYPE } from './event-repo.js';
import { writeEventIndex } from './events.js';
import { writeIndex } from '../listings/indexer.js';
import { buildEventListing, buildListing, type EventListing, type EventListingImage, type Listing, type ListingUrls } from '../listings/listing.js';
import { findImage, findRelease, listImages, type ImageWithTypes, type Queryable } from './repo.js';

export type EntityName = 'release' | 'event';

/** A release or an event, as a change takes it. */
export interface EntityRef {
  id: number;
  gid: string;
}

/**
 * The tables of an entity's art, typed as the release's: the event's have the same columns
 * (the art table's owner column aside, named here), so one typed query serves both.
 */
export interface ArtTables {
  owner: 'release';
  art: 'cover_art';
  types: 'cover_art_type';
  kinds: 'art_type';
  /** The art table's column naming its owner. */
  column: 'release';
}

/** A listing of either archive: its entries (a release's have `back`), and the link field (`release` or `event`). */
export interface ArtListing {
  images: EventListingImage[];
}

/** An entry of an entity's listing. */
export type EntryOf<L extends ArtListing> = L['images'][number];

export interface ArtEntity<L extends ArtListing = ArtListing> {
  name: EntityName;
  tables: ArtTables;
  /** How messages name one of its images, and its art types (as artwork-redirect and the CLI do). */
  imageNoun: 'cover image' | 'event image';
  kindNoun: 'art type' | 'event art type';
  /** Whether its images count in the `images` counter (the metrics' cover art images). */
  counted: boolean;
  /** The entity with this MBID, or the one it was merged into. */
  find(db: Queryable, gid: string): Promise<EntityRef | undefined>;
  /** Why an MBID names none, with the command that adds it. */
  missing(mbid: string): string;
  findImage(db: Queryable, ownerId: number, imageId: number): Promise<{ id: number; suffix: string } | undefined>;
  listImages(db: Queryable, ownerId: number): Promise<ImageWithTypes[]>;
  listing(urls: ListingUrls, gid: string, images: ImageWithTypes[], approvedOnly: boolean): L;
  /** Rewrites its index.json from the database. */
  writeIndex(deps: IndexDeps, ownerId: number): Promise<void>;
}

export const RELEASE_ART: ArtEntity<Listing> = {
  name: 'release',
  tables: { owner: 'release', art: 'cover_art', types: 'cover_art_type', kinds: 'art_type', column: 'release' },
  imageNoun: 'cover image',
  kindNoun: 'art type',
  counted: true,
  find: (db, gid) => findRelease(db, gid),
  missing: (mbid) => `no release ${mbid}; add it first with: sleeve release add ${mbid} --release-group RG_MBID`,
  findImage: (db, ownerId, imageId) => findImage(db, ownerId, imageId),
  listImages: (db, ownerId) => listImages(db, ownerId),
  listing: (urls, gid, images, approvedOnly) => buildListing(urls, gid, images, approvedOnly),
  writeIndex: (deps, ownerId) => writeIndex(deps, ownerId),
};

export const EVENT_ART: ArtEntity<EventListing> = {
  name: 'event',
  tables: { owner: 'event', art: 'event_art', types: 'event_art_type', kinds: 'event_art_kind', column: 'event' } as unknown as ArtTables,
  imageNoun: 'event image',
  kindNoun: 'event art type',
  counted: false,
  find: (db, gid) => findEvent(db, gid),
  missing: (mbid) => `no event ${mbid}; add it first with: sleeve event add ${mbid}`,
  findImage: (db, ownerId, imageId) => findEventImage(db, ownerId, imageId),
  listImages: (db, ownerId) => listEventImages(db, ownerId),
  listing: (urls, gid, images, approvedOnly) => buildEventListing(urls, gid, images, approvedOnly, POSTER_TYPE),
  writeIndex: (deps, ownerId) => writeEventIndex(deps, ownerId),
};
