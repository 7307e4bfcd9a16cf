import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { csrfValid, EXPIRED, formAction, formParams, queryParams, redirectWithFlash, type SafeHtml } from '../../auth/pages.js';
import {
  chooseGroupRelease,
  coversNeedApproval,
  editImageOf,
  findReleaseGroup,
  groupReleases,
  loadKinds,
  ownerRevision,
  removeImageOf,
  reorderImagesOf,
  setGroupCover,
  type ChangeOptions,
  type Edit,
  type EntityRef,
  type ImageWithTypes,
} from '../../cover-art/index.js';
import { asEditor, COMMENT_MAX_LENGTH } from '../changes.js';
import { artPath, artRoute, RELEASE_PAGES, SITE_ENTITIES, type SiteEntity } from '../entities.js';
import { isAppError, notFound } from '../../shared/errors.js';
import { layout, mbidParam, type Looker } from '../respond.js';
import type { Site } from '../site.js';
import { auditCuration, type CurationEvent } from '../audit.js';
import { editForm, removeForm, reorderForm, setCoverForm } from '../views/forms.js';

type Editor = Looker & { accountId: number };

/** A change refused because the release changed after its form was checked (expectRevision): the form is stale. */
function changedMeanwhile(err: unknown): boolean {
  return isAppError(err) && err.code === 'CONFLICT';
}

/** What an edit form was made from: the image's types and comment (a changed image makes the post stale). */
function fingerprint(image: ImageWithTypes): string {
  return createHash('sha256').update(JSON.stringify([image.typeIds, image.comment])).digest('base64url').slice(0, 22);
}

/**
 * The change options of the signed-in editor (with the approver role read now), and the
 * message to show once done: what was done, or that it waits for an approver.
 */
async function changeBy(site: Site, editor: Editor, expectRevision?: number): Promise<{ options: ChangeOptions; said(done: string): string; edit(): number | undefined }> {
  let edit: Edit | undefined;
  const options: ChangeOptions = {
    editor: await asEditor(site.deps, { id: editor.accountId, name: editor.name }),
    expectRevision,
    onEdit: (e) => {
      edit = e;
    },
  };
  return { options, said: (done) => (edit?.status === 'pending' ? `Your change waits for an approver (edit #${edit.id}).` : done), edit: () => edit?.id };
}

const staleOrder = (entity: SiteEntity) => `Someone changed the images of this ${entity.name} while you were reordering them. This is the order now: make your changes again, then save.`;
const STALE_IMAGE = 'Someone changed this image since you opened the form. These are its types and comment now: make your changes again, then save.';
const STALE_COVER = "Someone changed the group's cover since you opened the form. This is the choice now: choose again, then save.";

/** The editing pages of a release's or an event's art and of a group's cover, for signed-in users. */
export function curationPages(app: FastifyInstance, site: Site): void {
  for (const entity of SITE_ENTITIES) {
    const c = curation(site, entity);
    imagePages(app, c);
    removalPages(app, c);
    orderPages(app, c);
  }
  groupCoverPages(app, curation(site, RELEASE_PAGES));
}

/** What the curation pages share: the catalogue, the release (or event) of a path with its editor, the answers. */
function curation(site: Site, entity: SiteEntity) {
  const { coverArt } = site.deps;
  const { db } = coverArt;
  const approvedOnly = coversNeedApproval(coverArt.approval);

  /** The signed-in editor and the release or event of the path (404 unknown, 400 malformed; a merged MBID's page redirects). */
  const open = async (req: FastifyRequest, reply: FastifyReply, path: (gid: string) => string): Promise<{ editor: Editor; owner: EntityRef } | undefined> => {
    const editor = await site.editor(req, reply);
    if (editor === undefined) return undefined;
    const mbid = mbidParam(req, reply, site.csp, editor);
    if (mbid === undefined) return undefined;
    const owner = await entity.art.find(db, mbid);
    if (owner === undefined) throw notFound(`There is no ${entity.name} ${mbid} here.`);
    if (owner.gid !== (req.params as { mbid: string }).mbid) {
      reply.redirect(path(owner.gid), req.method === 'GET' ? 301 : 307);
      return undefined;
    }
    return { editor, owner };
  };
  const imageOf = async (owner: EntityRef, req: FastifyRequest): Promise<{ image: ImageWithTypes; position: number; images: ImageWithTypes[] }> => {
    const id = (req.params as { id: string }).id;
    const images = await entity.art.listImages(db, owner.id);
    const position = images.findIndex((i) => String(i.id) === id);
    if (position === -1) throw notFound(`${entity.name === 'event' ? 'Event' : 'Release'} ${owner.gid} has no image ${id}.`);
    return { image: images[position] as ImageWithTypes, position: position + 1, images };
  };
  const show = (reply: FastifyReply, status: number, title: string, body: SafeHtml, editor: Editor, script = false) =>
    // The reorder page alone has a script (drag and drop).
    site.send(reply, status, layout(title, body, editor), { script });
  /**
   * After a change: its audit line, then every serving process told (read-your-writes, as the
   * API and the CLI do; the gallery's front door of this one at once), then Post/Redirect/Get.
   */
  const done = async (req: FastifyRequest, reply: FastifyReply, editor: Editor, event: CurationEvent, notice: string, location: string, facts: { release?: string; event?: string; releaseGroup?: string; image?: number; edit?: number | undefined }) => {
    auditCuration(req, event, { user: editor.name, account: editor.accountId, address: site.deps.pages.clientAddress(req), via: 'page', ...facts });
    await site.deps.afterChange?.();
    return redirectWithFlash(reply, { a: editor.accountId, n: notice }, location);
  };
  /** The facts of an audit line naming the release or the event. */
  const owned = (gid: string) => ({ [entity.name]: gid });
  return { site, entity, coverArt, db, approvedOnly, open, imageOf, show, done, owned };
}

type Curation = ReturnType<typeof curation>;

/** An image's types and comment. */
function imagePages(app: FastifyInstance, c: Curation): void {
  const { site, entity, coverArt, db, open, imageOf, show, done, owned } = c;
  // Types and comment.
  const editPath = (gid: string, req: FastifyRequest) => artPath(entity, gid, 'edit', (req.params as { id: string }).id);
  app.get(artRoute(entity, 'edit'), async function editImageForm(req, reply) {
    const opened = await open(req, reply, (gid) => editPath(gid, req));
    if (opened === undefined) return reply;
    const { editor, owner } = opened;
    const { image, position } = await imageOf(owner, req);
    const form = { entity, gid: owner.gid, image, position, artTypes: await loadKinds(db, entity.art), types: image.types, comment: image.comment, state: fingerprint(image), csrf: editor.csrf };
    return show(reply, 200, `Edit image ${position}`, editForm(site.urls, form), editor);
  });
  app.post(artRoute(entity, 'edit'), async function editImage(req, reply) {
    const opened = await open(req, reply, (gid) => editPath(gid, req));
    if (opened === undefined) return reply;
    const { editor, owner } = opened;
    // The revision first: a change committed after this read makes the change below a conflict.
    const revision = await ownerRevision(db, entity.art, owner.id);
    const { image, position } = await imageOf(owner, req);
    const form = formParams(req);
    const posted = { types: form.getAll('type'), comment: form.get('comment') ?? '' };
    const artTypes = await loadKinds(db, entity.art);
    const again = (status: number, error: string, values = posted, shown = image) =>
      show(reply, status, `Edit image ${position}`, editForm(site.urls, { entity, gid: owner.gid, image: shown, position, artTypes, ...values, state: fingerprint(shown), csrf: editor.csrf, error }), editor);
    const stale = (now: ImageWithTypes) => again(409, STALE_IMAGE, { types: now.types, comment: now.comment }, now);
    if (!csrfValid(req)) return again(400, EXPIRED);
    if (form.get('state') !== fingerprint(image)) return stale(image);
    if (posted.comment.length > COMMENT_MAX_LENGTH) return again(400, `The comment is longer than ${COMMENT_MAX_LENGTH} characters.`);
    return formAction(async () => {
      const by = await changeBy(site, editor, revision);
      try {
        await editImageOf(coverArt, entity.art, owner.gid, { imageId: String(image.id), types: posted.types, comment: posted.comment }, by.options);
      } catch (err) {
        if (changedMeanwhile(err)) return stale((await imageOf(owner, req)).image);
        throw err;
      }
      return done(req, reply, editor, 'cover_art.edited', by.said(`Saved the types and comment of image ${position}.`), `${artPath(entity, owner.gid)}#image-${image.id}`, { ...owned(owner.gid), image: image.id, edit: by.edit() });
    }, again);
  });
}

/** Removing an image, after confirmation. */
function removalPages(app: FastifyInstance, c: Curation): void {
  const { site, entity, coverArt, open, imageOf, show, done, owned } = c;
  // Removal, after confirmation.
  const removePath = (gid: string, req: FastifyRequest) => artPath(entity, gid, 'remove', (req.params as { id: string }).id);
  app.get(artRoute(entity, 'remove'), async function removeImageForm(req, reply) {
    const opened = await open(req, reply, (gid) => removePath(gid, req));
    if (opened === undefined) return reply;
    const { editor, owner } = opened;
    const { image, position } = await imageOf(owner, req);
    return show(reply, 200, `Remove image ${position}?`, removeForm(site.urls, { entity, gid: owner.gid, image, position, csrf: editor.csrf }), editor);
  });
  app.post(artRoute(entity, 'remove'), async function removeImage(req, reply) {
    const opened = await open(req, reply, (gid) => removePath(gid, req));
    if (opened === undefined) return reply;
    const { editor, owner } = opened;
    const { image, position } = await imageOf(owner, req);
    const again = (status: number, error: string) => show(reply, status, `Remove image ${position}?`, removeForm(site.urls, { entity, gid: owner.gid, image, position, csrf: editor.csrf, error }), editor);
    if (!csrfValid(req)) return again(400, EXPIRED);
    return formAction(async () => {
      const by = await changeBy(site, editor);
      await removeImageOf(coverArt, entity.art, owner.gid, String(image.id), by.options);
      return done(req, reply, editor, 'cover_art.removed', by.said(`Removed image ${position}.`), artPath(entity, owner.gid), { ...owned(owner.gid), image: image.id, edit: by.edit() });
    }, again);
  });
}

/** The order of a release's images. */
function orderPages(app: FastifyInstance, c: Curation): void {
  const { site, entity, coverArt, db, open, show, done, owned } = c;
  // Order.
  const title = `Reorder ${entity.word}`;
  const reorderPath = (gid: string) => artPath(entity, gid, 'reorder');
  app.get(artRoute(entity, 'reorder'), async function reorderPage(req, reply) {
    const opened = await open(req, reply, reorderPath);
    if (opened === undefined) return reply;
    const { editor, owner } = opened;
    const images = await entity.art.listImages(db, owner.id);
    const current = images.map((i) => String(i.id)).join(',');
    const q = queryParams(req);
    const previous = q.get('previous') ?? current;
    if (previous !== current) return show(reply, 409, title, reorderForm(site.urls, { entity, gid: owner.gid, images, previous: current, csrf: editor.csrf, error: staleOrder(entity) }), editor, true);
    const proposed = arrange(images, q.get('order'));
    const move = /^(up|down):(\d{1,15})$/.exec(q.get('move') ?? '');
    let moved: { id: number; direction: 'up' | 'down' } | undefined;
    if (move !== null) {
      const at = proposed.findIndex((i) => String(i.id) === move[2]);
      const to = at + (move[1] === 'up' ? -1 : 1);
      if (at !== -1 && to >= 0 && to < proposed.length) {
        [proposed[at], proposed[to]] = [proposed[to] as ImageWithTypes, proposed[at] as ImageWithTypes];
        // Focus stays on the button pressed, unless the image reached the end that disables it.
        const direction = move[1] as 'up' | 'down';
        moved = { id: Number(move[2]), direction: (direction === 'up' && to === 0) || (direction === 'down' && to === proposed.length - 1) ? (direction === 'up' ? 'down' : 'up') : direction };
      }
    }
    return show(reply, 200, title, reorderForm(site.urls, { entity, gid: owner.gid, images: proposed, previous: current, moved, csrf: editor.csrf }), editor, true);
  });
  app.post(artRoute(entity, 'reorder'), async function reorder(req, reply) {
    const opened = await open(req, reply, reorderPath);
    if (opened === undefined) return reply;
    const { editor, owner } = opened;
    // The revision first: a change committed after this read makes the change below a conflict.
    const revision = await ownerRevision(db, entity.art, owner.id);
    const images = await entity.art.listImages(db, owner.id);
    const current = images.map((i) => String(i.id)).join(',');
    const form = formParams(req);
    const order = (form.get('order') ?? '').split(',').filter((s) => s !== '');
    const again = (status: number, error: string, shown = arrange(images, form.get('order')), previous = current) =>
      show(reply, status, title, reorderForm(site.urls, { entity, gid: owner.gid, images: shown, previous, csrf: editor.csrf, error }), editor, true);
    if (!csrfValid(req)) return again(400, EXPIRED);
    if (form.get('previous') !== current) return again(409, staleOrder(entity), images);
    return formAction(async () => {
      const by = await changeBy(site, editor, revision);
      try {
        await reorderImagesOf(coverArt, entity.art, owner.gid, order, by.options);
      } catch (err) {
        if (!changedMeanwhile(err)) throw err;
        const now = await entity.art.listImages(db, owner.id);
        return again(409, staleOrder(entity), now, now.map((i) => String(i.id)).join(','));
      }
      return done(req, reply, editor, 'cover_art.reordered', by.said('Saved the new order.'), artPath(entity, owner.gid), { ...owned(owner.gid), edit: by.edit() });
    }, (status, error) => again(status, error, images));
  });
}

/** A release group's cover. */
function groupCoverPages(app: FastifyInstance, c: Curation): void {
  const { site, coverArt, db, approvedOnly, show, done } = c;
  // The group's cover.
  const coverPath = (gid: string) => `/release-group/${gid}/set-cover-art`;
  const openGroup = async (req: FastifyRequest, reply: FastifyReply) => {
    const editor = await site.editor(req, reply);
    if (editor === undefined) return undefined;
    const mbid = mbidParam(req, reply, site.csp, editor);
    if (mbid === undefined) return undefined;
    const group = await findReleaseGroup(db, mbid);
    if (group === undefined) throw notFound(`There is no release group ${mbid} here.`);
    if (group.gid !== (req.params as { mbid: string }).mbid) {
      reply.redirect(coverPath(group.gid), req.method === 'GET' ? 301 : 307);
      return undefined;
    }
    return { editor, group, ...(await groupChoice(group.id)) };
  };
  /** The group's releases, its chosen one ('' for none: the form's `previous`) and the one shown as its cover. */
  const groupChoice = async (groupId: number) => {
    const { releases, chosen } = await groupReleases(db, groupId, approvedOnly);
    const shown = (await chooseGroupRelease(db, groupId, approvedOnly))?.gid;
    return { releases, chosen: chosen ?? '', shown };
  };
  app.get('/release-group/:mbid/set-cover-art', async function setCoverPage(req, reply) {
    const g = await openGroup(req, reply);
    if (g === undefined) return reply;
    const f = { group: g.group.gid, releases: g.releases, selected: g.shown, previous: g.chosen, csrf: g.editor.csrf };
    return show(reply, 200, "Choose the group's cover", setCoverForm(site.urls, f), g.editor);
  });
  app.post('/release-group/:mbid/set-cover-art', async function setCover(req, reply) {
    const g = await openGroup(req, reply);
    if (g === undefined) return reply;
    const form = formParams(req);
    const picked = form.get('release') ?? '';
    const again = (status: number, error: string, selected: string | undefined = picked) =>
      show(reply, status, "Choose the group's cover", setCoverForm(site.urls, { group: g.group.gid, releases: g.releases, selected, previous: g.chosen, csrf: g.editor.csrf, error }), g.editor);
    if (!csrfValid(req)) return again(400, EXPIRED);
    if (form.get('previous') !== g.chosen) return again(409, STALE_COVER, g.shown);
    const release = g.releases.find((r) => r.gid === picked);
    if (release === undefined) return again(400, picked === '' ? 'Choose a release.' : `Release ${picked} is not in this group.`);
    if (release.front === undefined) return again(400, 'That release has no front cover, so it cannot represent the group.');
    return formAction(async () => {
      const by = await changeBy(site, g.editor);
      try {
        // The choice the form was made from, checked again inside the change: another editor's may have landed since the check above.
        await setGroupCover(coverArt, g.group.gid, release.gid, by.options, g.chosen === '' ? null : g.chosen);
      } catch (err) {
        if (!changedMeanwhile(err)) throw err;
        const now = await groupChoice(g.group.id);
        const f = { group: g.group.gid, releases: now.releases, selected: now.shown, previous: now.chosen, csrf: g.editor.csrf, error: STALE_COVER };
        return show(reply, 409, "Choose the group's cover", setCoverForm(site.urls, f), g.editor);
      }
      return done(req, reply, g.editor, 'cover_art.group_cover_set', by.said(`The group's cover now comes from ${release.name || release.gid}.`), `/release-group/${g.group.gid}/cover-art`, {
        releaseGroup: g.group.gid,
        release: release.gid,
        edit: by.edit(),
      });
    }, again);
  });
}

/** The images in the order given (ids separated by commas), when it names each exactly once; else as they are. */
function arrange(images: ImageWithTypes[], order: string | null): ImageWithTypes[] {
  const ids = (order ?? '').split(',');
  const byId = new Map(images.map((i) => [String(i.id), i]));
  const out = ids.map((id) => byId.get(id)).filter((i): i is ImageWithTypes => i !== undefined);
  return new Set(out).size === images.length && ids.length === images.length ? out : [...images];
}
