import { html, type SafeHtml } from '../auth/pages.js';
import { eventName, EVENT_ART, releaseDetails, RELEASE_ART, type ArtEntity, type EntityName, type EntityRef, type Queryable } from '../cover-art/index.js';

/*
 * What the website's pages and its write API need to know of what art belongs to: a release
 * (the Cover Art Archive) or an event (the Event Art Archive; docs/decisions.md, "Events beside
 * releases"). The pages, the upload page and the API routes are written once and registered for
 * each, at musicbrainz.org's paths: /release/{mbid}/cover-art, /event/{mbid}/event-art, and
 * add-, edit-, remove- and reorder- before those.
 */

/** An image type that makes a cover, and what the pages call the image it makes. */
export interface CoverRole {
  /** The listing's flag. */
  flag: 'front' | 'back';
  type: string;
  role: string;
  /** Whether a PDF can never hold it (an event's poster: the event art archive's index_listing view). */
  notPdf: boolean;
}

export interface SiteEntity {
  art: ArtEntity;
  /** The first segment of its paths, and its name in messages. */
  name: EntityName;
  /** The pages' words for its art. */
  word: 'cover art' | 'event art';
  /** The last segment of its art pages' paths, as musicbrainz.org's. */
  slug: 'cover-art' | 'event-art';
  /** The write API's prefix (docs/api.md, "The write API for tools"). */
  apiPrefix: '/api/cover-art' | '/api/event-art';
  covers: CoverRole[];
  /** Its name on pages (its MBID when it has none), and what is said below it (a release's group and date). */
  describe(db: Queryable, owner: EntityRef): Promise<{ label: string; about: SafeHtml | '' }>;
}

/** How a release is named on pages: its title, or its MBID when it has none. */
export function releaseLabel(r: { name: string; gid: string }): string {
  return r.name === '' ? `Release ${r.gid}` : r.name;
}

export const RELEASE_PAGES: SiteEntity = {
  art: RELEASE_ART,
  name: 'release',
  word: 'cover art',
  slug: 'cover-art',
  apiPrefix: '/api/cover-art',
  covers: [
    { flag: 'front', type: 'Front', role: 'front cover', notPdf: false },
    { flag: 'back', type: 'Back', role: 'back cover', notPdf: false },
  ],
  async describe(db, owner) {
    const d = await releaseDetails(db, owner.id);
    if (d === undefined) return { label: releaseLabel({ name: '', gid: owner.gid }), about: '' };
    return {
      label: releaseLabel(d),
      about: html`<p class="muted">Release group: <a href="/release-group/${d.groupGid}/cover-art">${d.groupName || d.groupGid}</a>${d.date ? html` · released ${d.date}` : ''}</p>`,
    };
  },
};

export const EVENT_PAGES: SiteEntity = {
  art: EVENT_ART,
  name: 'event',
  word: 'event art',
  slug: 'event-art',
  apiPrefix: '/api/event-art',
  covers: [{ flag: 'front', type: 'Poster', role: 'poster', notPdf: true }],
  async describe(db, owner) {
    const name = await eventName(db, owner.id);
    return { label: name === '' ? `Event ${owner.gid}` : name, about: '' };
  },
};

export const SITE_ENTITIES: readonly SiteEntity[] = [RELEASE_PAGES, EVENT_PAGES];

/** An art page of a release or an event: its gallery, or `add`, `edit`, `remove` or `reorder` (with the image's id). */
export function artPath(e: SiteEntity, gid: string, page?: 'add' | 'edit' | 'remove' | 'reorder', id?: number | string): string {
  if (page === undefined) return `/${e.name}/${gid}/${e.slug}`;
  return `/${e.name}/${gid}/${page}-${e.slug}${id === undefined ? '' : `/${id}`}`;
}

/** The same route pattern of an art page (`:mbid`, `:id`), for registering it. */
export function artRoute(e: SiteEntity, page?: 'add' | 'edit' | 'remove' | 'reorder'): string {
  return artPath(e, ':mbid', page, page === 'edit' || page === 'remove' ? ':id' : undefined);
}
