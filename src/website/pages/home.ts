import type { FastifyInstance, FastifyReply } from 'fastify';
import { html, queryParams, SafeHtml } from '../../auth/pages.js';
import { findEvent, findRelease, findReleaseGroup, recentImages } from '../../cover-art/index.js';
import { parseMbid } from '../../shared/uuid.js';
import { artPath, EVENT_PAGES } from '../entities.js';
import { layout, type Looker } from '../respond.js';
import type { Site } from '../site.js';
import { accountPart, recentAdditions, searchForm } from '../views/home.js';

/** How many recent additions the home page shows. */
const RECENT_COUNT = 12;

const UUID_IN_TEXT = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

/** The home page (search by MBID, recent additions of both archives, the account links) and the search. */
export function homePages(app: FastifyInstance, site: Site): void {
  const { db } = site.deps.coverArt;

  const home = async (reply: FastifyReply, viewer: Looker | undefined, status: number, value = '', error?: string) => {
    const recent = await site.cache.body(db, 'home', async () => ({ title: '', body: recentAdditions(site.urls, await recentImages(db, RECENT_COUNT)).value }));
    const body = html`<p>Cover art of MusicBrainz releases and event art of MusicBrainz events, served the way the Cover Art Archive and the Event Art Archive serve them.</p>
${searchForm(value, error)}${new SafeHtml(recent.body)}${accountPart(viewer !== undefined)}`;
    return site.send(reply, status, layout('Cover art and event art', body, viewer));
  };

  app.get('/', async function homePage(req, reply) {
    return home(reply, await site.viewer(req, reply), 200);
  });

  app.get('/search', async function search(req, reply) {
    const viewer = await site.viewer(req, reply);
    const text = (queryParams(req).get('mbid') ?? '').trim().slice(0, 500);
    const mbid = parseMbid(UUID_IN_TEXT.exec(text)?.[0] ?? '');
    if (mbid === undefined) {
      const why = text === '' ? 'Enter an MBID to search for.' : `“${text}” is not an MBID: an MBID looks like 76df3287-6cda-33eb-8e9a-044b5e15ffdd.`;
      return home(reply, viewer, 400, text, why);
    }
    const release = text.includes('release-group') ? undefined : await findRelease(db, mbid);
    if (release !== undefined) return reply.redirect(`/release/${release.gid}/cover-art`, 303);
    const group = await findReleaseGroup(db, mbid);
    if (group !== undefined) return reply.redirect(`/release-group/${group.gid}/cover-art`, 303);
    const fallback = text.includes('release-group') ? await findRelease(db, mbid) : undefined;
    if (fallback !== undefined) return reply.redirect(`/release/${fallback.gid}/cover-art`, 303);
    // An event of the Event Art Archive (its MBIDs never name a release: MusicBrainz's are unique across entities).
    const event = await findEvent(db, mbid);
    if (event !== undefined) return reply.redirect(artPath(EVENT_PAGES, event.gid), 303);
    return home(reply, viewer, 404, text, `There is no release, release group or event ${mbid} here.`);
  });
}
