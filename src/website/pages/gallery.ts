import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { html, SafeHtml, takeFlash } from '../../auth/pages.js';
import type { CachedPage } from '../page-cache.js';
import { chooseGroupRelease, coversNeedApproval, findReleaseGroup, groupReleases, imageKey, listEdits, type EntityRef } from '../../cover-art/index.js';
import { notFound } from '../../shared/errors.js';
import { artPath, artRoute, RELEASE_PAGES, SITE_ENTITIES, type SiteEntity } from '../entities.js';
import { layout, mbidParam, type Looker } from '../respond.js';
import type { Site } from '../site.js';
import { artGallery, groupGallery, type GalleryImage } from '../views/gallery.js';

type SignedInLooker = Looker & { accountId: number };

/** The images of a release or an event as the gallery shows them, beside their listing entries (dimensions read once per image, then kept). */
async function galleryImages(site: Site, entity: SiteEntity, owner: EntityRef): Promise<GalleryImage[]> {
  const rows = await entity.art.listImages(site.deps.coverArt.db, owner.id);
  const listing = entity.art.listing(site.urls.listing, owner.gid, rows, coversNeedApproval(site.deps.coverArt.approval));
  const out: GalleryImage[] = [];
  for (const [i, row] of rows.entries()) {
    out.push({ row, entry: listing.images[i] as GalleryImage['entry'], dimensions: await site.dimensions.of(imageKey(owner.gid, row.id, row.suffix, undefined)) });
  }
  return out;
}

/** The flash notice for a signed-in viewer, as a paragraph (read once). */
export async function notice(site: Site, req: FastifyRequest, reply: FastifyReply, viewer: SignedInLooker | undefined) {
  if (viewer === undefined) return '';
  const flash = await takeFlash(site.deps.pages.deps, req, reply, { ...viewer, signedInAt: 0 });
  return flash.notice === undefined ? '' : html`<p class="notice" role="status">${flash.notice}</p>`;
}

/**
 * A cached body in the layout, for this viewer, with the viewer's flash notice. A visitor's
 * page is also kept to be answered before routing (`generation`: taken before the reads it
 * was made from).
 */
async function sendCached(site: Site, req: FastifyRequest, reply: FastifyReply, viewer: SignedInLooker | undefined, cached: CachedPage, generation: number, entity: SiteEntity): Promise<FastifyReply> {
  const { word } = entity;
  const make = (flash: SafeHtml | string) => layout(`${word.charAt(0).toUpperCase()}${word.slice(1)}: ${cached.title}`, html`${flash}${new SafeHtml(cached.body)}`, viewer);
  if (viewer === undefined) {
    // A visitor's page is the same for every visitor: sent as made the first time.
    cached.visitorPage ??= Buffer.from(make(''));
    site.keepForVisitors(req, req.routeOptions.url ?? 'other', cached.visitorPage, generation);
    // As the front door answers it (which sends it gzipped to whoever asks).
    reply.header('vary', 'accept-encoding');
    return site.send(reply, 200, cached.visitorPage);
  }
  return site.send(reply, 200, make(await notice(site, req, reply, viewer)));
}

const MAX_PENDING_SHOWN = 100;

/** How many edits of the release (or event) wait for an approver, with a link to them; the link to the history always. */
function pendingNote(entity: SiteEntity, gid: string, count: string): SafeHtml {
  const history = html`<a href="/${entity.name}/${gid}/edits">Edit history</a>`;
  if (count === '0') return html`<p class="muted">${history}</p>`;
  return html`<p class="notice"><a href="/${entity.name}/${gid}/edits?status=pending">${count === '1' ? '1 pending edit' : `${count} pending edits`}</a> wait for an approver. ${history}</p>`;
}

/** The galleries of releases and events, and of release groups, for everyone. */
export function galleryPages(app: FastifyInstance, site: Site): void {
  for (const entity of SITE_ENTITIES) artGalleryPage(app, site, entity);
  groupGalleryPage(app, site);
}

/** A release's gallery (/release/{mbid}/cover-art) or an event's (/event/{mbid}/event-art). */
function artGalleryPage(app: FastifyInstance, site: Site, entity: SiteEntity): void {
  const { db } = site.deps.coverArt;
  app.get(artRoute(entity), async function artGalleryPage(req, reply) {
    const generation = site.visitorGeneration();
    const viewer = await site.viewer(req, reply);
    const mbid = mbidParam(req, reply, site.csp, viewer);
    if (mbid === undefined) return reply;
    const owner = await entity.art.find(db, mbid);
    if (owner === undefined) throw notFound(`There is no ${entity.name} ${mbid} here.`);
    if (owner.gid !== (req.params as { mbid: string }).mbid) return reply.redirect(artPath(entity, owner.gid), 301);
    const editor = viewer !== undefined;
    // Pending edits other than additions do not move the catalogue version: their count is read per request and is part of the key.
    const pending = await listEdits(db, { [entity.name]: owner.gid, status: 'pending', limit: MAX_PENDING_SHOWN });
    const count = pending.next === null ? String(pending.edits.length) : `${MAX_PENDING_SHOWN}+`;
    const cached = await site.cache.body(db, `${entity.name} ${owner.gid} ${editor} ${count}`, async () => {
      const { label, about } = await entity.describe(db, owner);
      const gallery = artGallery(site.urls, { entity, gid: owner.gid, about }, await galleryImages(site, entity, owner), editor);
      return { title: label, body: html`${pendingNote(entity, owner.gid, count)}${gallery}`.value };
    });
    return sendCached(site, req, reply, viewer, cached, generation, entity);
  });
}

/** A release group's page: its cover, where it comes from and why. */
function groupGalleryPage(app: FastifyInstance, site: Site): void {
  const { db } = site.deps.coverArt;
  const approvedOnly = coversNeedApproval(site.deps.coverArt.approval);

  app.get('/release-group/:mbid/cover-art', async function groupGalleryPage(req, reply) {
    const generation = site.visitorGeneration();
    const viewer = await site.viewer(req, reply);
    const mbid = mbidParam(req, reply, site.csp, viewer);
    if (mbid === undefined) return reply;
    const group = await findReleaseGroup(db, mbid);
    if (group === undefined) throw notFound(`There is no release group ${mbid} here.`);
    if (group.gid !== (req.params as { mbid: string }).mbid) return reply.redirect(`/release-group/${group.gid}/cover-art`, 301);
    const editor = viewer !== undefined;
    const cached = await site.cache.body(db, `group ${group.gid} ${editor}`, async () => {
      const [{ releases, name }, choice] = await Promise.all([groupReleases(db, group.id, approvedOnly), chooseGroupRelease(db, group.id, approvedOnly)]);
      const chosen = releases.find((r) => r.id === choice?.id);
      const view = { gid: group.gid, name, releases, chosen: chosen === undefined || choice === undefined ? undefined : { release: chosen, reason: choice.reason } };
      return { title: name === '' ? `Release group ${group.gid}` : name, body: groupGallery(site.urls, view, editor).value };
    });
    return sendCached(site, req, reply, viewer, cached, generation, RELEASE_PAGES);
  });
}
