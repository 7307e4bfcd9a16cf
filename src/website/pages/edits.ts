import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { accountRoles, csrfValid, EXPIRED, findAccountByName, formParams, html, queryParams, redirectWithFlash, type SafeHtml } from '../../auth/pages.js';
import { approveEdit, findEdit, listEdits, rejectEdit, releaseDetails, type Edit } from '../../cover-art/index.js';
import { isAppError, notFound } from '../../shared/errors.js';
import { artPath, SITE_ENTITIES, type SiteEntity } from '../entities.js';
import { layout, mbidParam, problemPage, type Looker } from '../respond.js';
import type { Site } from '../site.js';
import { auditCuration } from '../audit.js';
import { editOwner, editPage, historyPage } from '../views/edits.js';
import { notice } from './gallery.js';

type Viewer = Looker & { accountId: number };

const PAGE_SIZE = 50;
const STATUS_OF: Record<string, number> = { CONFLICT: 409, NOT_FOUND: 404 };

/** The edit pages: one per edit (with Approve and Reject for approvers), and the histories of a release, an event and an editor. */
export function editPages(app: FastifyInstance, site: Site): void {
  oneEditPages(app, site);
  historyPages(app, site);
}

/** One edit's page, and its Approve and Reject (or Withdraw) buttons. */
function oneEditPages(app: FastifyInstance, site: Site): void {
  const { coverArt } = site.deps;
  const { db } = coverArt;

  const editOf = async (req: FastifyRequest): Promise<Edit> => {
    const id = (req.params as { id: string }).id;
    const edit = /^\d{1,15}$/.test(id) ? await findEdit(db, id) : undefined;
    if (edit === undefined) throw notFound(`There is no edit ${id} here.`);
    return edit;
  };
  /** What the viewer may do with a pending edit: approvers decide others' edits; an editor may withdraw their own. */
  const mayOf = async (edit: Edit, viewer: Viewer | undefined) => {
    if (viewer === undefined || edit.status !== 'pending') return { approve: false, reject: false, withdraw: false, approver: false };
    const approver = (await accountRoles(site.deps.pages.deps, viewer.accountId)).includes('approver');
    const own = edit.editor?.id === viewer.accountId;
    return { approve: approver && !own, reject: approver && !own, withdraw: own, approver };
  };
  /** The edit's release or event as it is now (its name, a release's group), and the edit's image while it is stored. */
  const ownerNow = async (edit: Edit) => {
    const { entity, gid } = editOwner(edit);
    const owner = gid === null ? undefined : await entity.art.find(db, gid);
    if (owner === undefined) return { owner: undefined, image: undefined };
    const image = edit.image === null ? undefined : (await entity.art.listImages(db, owner.id)).find((i) => String(i.id) === edit.image);
    const details = entity.name === 'release' ? await releaseDetails(db, owner.id) : undefined;
    const group = details === undefined ? undefined : { gid: details.groupGid, name: details.groupName };
    return { owner: { label: (await entity.describe(db, owner)).label, group }, image };
  };
  const show = async (reply: FastifyReply, status: number, edit: Edit, viewer: Viewer | undefined, extra: { flash?: SafeHtml | string; error?: string; note?: string } = {}) => {
    const may = await mayOf(edit, viewer);
    const body = editPage(site.urls, { edit, ...(await ownerNow(edit)), may, csrf: viewer?.csrf, error: extra.error, note: extra.note });
    return site.send(reply, status, layout(`Edit #${edit.id}`, html`${extra.flash ?? ''}${body}`, viewer));
  };

  app.get('/edit/:id', async function editPageRoute(req, reply) {
    const viewer = await site.viewer(req, reply);
    const edit = await editOf(req);
    return show(reply, 200, edit, viewer, { flash: await notice(site, req, reply, viewer) });
  });

  for (const verb of ['approve', 'reject'] as const) {
    app.post(`/edit/:id/${verb}`, async function closeEditRoute(req, reply) {
      const viewer = await site.editor(req, reply);
      if (viewer === undefined) return reply;
      const edit = await editOf(req);
      const note = (formParams(req).get('note') ?? '').trim();
      if (!csrfValid(req)) return show(reply, 400, edit, viewer, { error: EXPIRED, note });
      if (edit.status !== 'pending') return show(reply, 409, edit, viewer, { error: `Edit #${edit.id} is no longer pending: it was ${edit.status}.` });
      const may = await mayOf(edit, viewer);
      if (verb === 'approve' ? !may.approve : !may.reject && !may.withdraw) {
        auditCuration(req, 'cover_art.edit_refused', { user: viewer.name, account: viewer.accountId, address: site.deps.pages.clientAddress(req), via: 'page', ...edited(edit), edit: edit.id, reason: `${verb}_not_allowed` });
        const why = edit.editor?.id === viewer.accountId ? 'Nobody approves their own edit: another approver decides it.' : `Only approvers ${verb} the edits of others.`;
        return show(reply, edit.editor?.id === viewer.accountId ? 400 : 403, edit, viewer, { error: why, note });
      }
      if (note.length > 255) return show(reply, 400, edit, viewer, { error: 'The note is longer than 255 characters.', note });
      const by = { id: viewer.accountId, name: viewer.name, approver: may.approver };
      let closed: Edit;
      try {
        closed = verb === 'approve' ? await approveEdit(coverArt, edit.id, by, note || undefined) : await rejectEdit(coverArt, edit.id, by, note || undefined);
      } catch (err) {
        if (!isAppError(err) || !err.expose) throw err;
        return show(reply, STATUS_OF[err.code] ?? 400, (await findEdit(db, edit.id)) ?? edit, viewer, { error: capitalised(err.message), note });
      }
      await site.deps.afterChange?.();
      auditCuration(req, closed.status === 'approved' ? 'cover_art.edit_approved' : 'cover_art.edit_rejected', {
        user: viewer.name,
        account: viewer.accountId,
        address: site.deps.pages.clientAddress(req),
        via: 'page',
        ...edited(edit),
        edit: edit.id,
        reason: may.withdraw && !may.reject ? 'withdrawn' : verb === 'approve' ? 'approved' : 'rejected',
      });
      const done = closed.status === 'approved' ? 'Approved' : may.withdraw && !may.reject ? 'Withdrew' : 'Rejected';
      return redirectWithFlash(reply, { a: viewer.accountId, n: `${done} edit #${edit.id}.` }, `/edit/${edit.id}`);
    });
  }

}

/** The histories of a release and of an editor, newest first, a page at a time. */
function historyPages(app: FastifyInstance, site: Site): void {
  const { db } = site.deps.coverArt;

  /** The history's query: the pending-only filter and the page (`before`); undefined after answering 400. */
  const historyQuery: HistoryQuery = (req, reply, viewer) => {
    const q = queryParams(req);
    const before = q.get('before');
    if (before !== null && !/^\d{1,15}$/.test(before)) {
      site.send(reply, 400, problemPage('Bad request', '"before" must be an edit number.', viewer));
      return undefined;
    }
    return { pendingOnly: q.get('status') === 'pending', before: before === null ? undefined : Number(before) };
  };

  for (const entity of SITE_ENTITIES) ownerHistoryPage(app, site, entity, historyQuery);

  app.get('/user/:name/edits', async function editorEdits(req, reply) {
    const viewer = await site.viewer(req, reply);
    const account = await findAccountByName(site.deps.pages.deps, (req.params as { name: string }).name);
    if (account === undefined) throw notFound('There is no such user.');
    const query = historyQuery(req, reply, viewer);
    if (query === undefined) return reply;
    const { edits, next } = await listEdits(db, { editorId: account.id, status: query.pendingOnly ? 'pending' : undefined, before: query.before, limit: PAGE_SIZE });
    const path = `/user/${encodeURIComponent(account.name)}/edits`;
    const body = historyPage({ of: account.name, path, edits, next, pendingOnly: query.pendingOnly, show: 'release' });
    return site.send(reply, 200, layout(`Edits by ${account.name}`, body, viewer));
  });
}

/** The facts of an audit line naming what an edit changes: its release, or its event. */
function edited(edit: Edit): { release?: string; event?: string } {
  return edit.event !== null ? { event: edit.event } : edit.release !== null ? { release: edit.release } : {};
}

type HistoryQuery = (req: FastifyRequest, reply: FastifyReply, viewer: Looker | undefined) => { pendingOnly: boolean; before: number | undefined } | undefined;

/** The history of a release's or an event's art (/release/{mbid}/edits, /event/{mbid}/edits), with those merged into it. */
function ownerHistoryPage(app: FastifyInstance, site: Site, entity: SiteEntity, historyQuery: HistoryQuery): void {
  const { db } = site.deps.coverArt;
  app.get(`/${entity.name}/:mbid/edits`, async function ownerEdits(req, reply) {
    const viewer = await site.viewer(req, reply);
    const mbid = mbidParam(req, reply, site.csp, viewer);
    if (mbid === undefined) return reply;
    const owner = await entity.art.find(db, mbid);
    if (owner === undefined) throw notFound(`There is no ${entity.name} ${mbid} here.`);
    if (owner.gid !== (req.params as { mbid: string }).mbid) {
      const query = req.url.includes('?') ? req.url.slice(req.url.indexOf('?')) : '';
      return reply.redirect(`/${entity.name}/${owner.gid}/edits${query}`, 301);
    }
    const query = historyQuery(req, reply, viewer);
    if (query === undefined) return reply;
    const { edits, next } = await listEdits(db, { [entity.name]: owner.gid, status: query.pendingOnly ? 'pending' : undefined, before: query.before, limit: PAGE_SIZE });
    const path = `/${entity.name}/${owner.gid}/edits`;
    const { label } = await entity.describe(db, owner);
    const body = historyPage({ of: label, word: entity.word, path, edits, next, pendingOnly: query.pendingOnly, show: 'editor' });
    const back = html`<p><a href="${artPath(entity, owner.gid)}">Back to the ${entity.name}'s ${entity.word}</a></p>`;
    return site.send(reply, 200, layout(`Edits of ${label}`, html`${back}${body}`, viewer));
  });
}

function capitalised(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1) + (s.endsWith('.') ? '' : '.');
}

