import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { html, SafeHtml, takeFlash } from '../../auth/pages.js';
import type { CachedPage } from '../page-cache.js';
import { chooseGroupRelease, coversNeedApproval, findRelease, findReleaseGroup, groupReleases, imageKey, listEdits, listImages, releaseDetails } from '../../cover-art/index.js';
import { notFound } from '../../shared/errors.js';
import { entries } from '../images.js';
import { layout, mbidParam, type Looker } from '../respond.js';

type SignedInLooker = Looker & { accountId: number };
import type { Site } from '../site.js';
import { groupGallery, releaseGallery, releaseLabel, type GalleryImage } from '../views/gallery.js';

/** The release's images as the gallery shows them (dimensions read once per image, then kept). */
async function galleryImages(site: Site, releaseId: number, gid: string): Promise<GalleryImage[]> {
  const rows = await listImages(site.deps.coverArt.db, releaseId);
  const out: GalleryImage[] = [];
  for (const { row, entry } of entries(site.urls, gid, rows, coversNeedApproval(site.deps.coverArt.approval))) {
    out.push({ row, entry, dimensions: await site.dimensions.of(imageKey(gid, row.id, row.suffix, undefined)) });
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
async function sendCached(site: Site, req: FastifyRequest, reply: FastifyReply, viewer: SignedInLooker | undefined, cached: CachedPage, generation: number): Promise<FastifyReply> {
  const make = (flash: SafeHtml | string) => layout(`Cover art: ${cached.title}`, html`${flash}${new SafeHtml(cached.body)}`, viewer);
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

/** How many edits of the release wait for an approver, with a link to them; the link to the history always. */
function pendingNote(gid: string, count: string): SafeHtml {
  const history = html`<a href="/release/${gid}/edits">Edit history</a>`;
  if (count === '0') return html`<p class="muted">${history}</p>`;
  return html`<p class="notice"><a href="/release/${gid}/edits?status=pending">${count === '1' ? '1 pending edit' : `${count} pending edits`}</a> wait for an approver. ${history}</p>`;
}

/** The release and release group galleries, for everyone. */
export function galleryPages(app: FastifyInstance, site: Site): void {
  const { db } = site.deps.coverArt;
  const approvedOnly = coversNeedApproval(site.deps.coverArt.approval);

  app.get('/release/:mbid/cover-art', async function releaseGalleryPage(req, reply) {
    const generation = site.visitorGeneration();
    const viewer = await site.viewer(req, reply);
    const mbid = mbidParam(req, reply, site.csp, viewer);
    if (mbid === undefined) return reply;
    const release = await findRelease(db, mbid);
    if (release === undefined) throw notFound(`There is no release ${mbid} here.`);
    if (release.gid !== (req.params as { mbid: string }).mbid) return reply.redirect(`/release/${release.gid}/cover-art`, 301);
    const editor = viewer !== undefined;
    // Pending edits other than additions do not move the catalogue version: their count is read per request and is part of the key.
    const pending = await listEdits(db, { release: release.gid, status: 'pending', limit: MAX_PENDING_SHOWN });
    const count = pending.next === null ? String(pending.edits.length) : `${MAX_PENDING_SHOWN}+`;
    const cached = await site.cache.body(db, `release ${release.gid} ${editor} ${count}`, async () => {
      const details = await releaseDetails(db, release.id);
      if (details === undefined) throw notFound(`There is no release ${mbid} here.`);
      const gallery = releaseGallery(site.urls, details, await galleryImages(site, release.id, release.gid), editor);
      return { title: releaseLabel(details), body: html`${pendingNote(release.gid, count)}${gallery}`.value };
    });
    return sendCached(site, req, reply, viewer, cached, generation);
  });

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
    return sendCached(site, req, reply, viewer, cached, generation);
  });
}
