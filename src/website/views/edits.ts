import { html, type SafeHtml } from '../../auth/pages.js';
import type { Edit, EditStatus } from '../../cover-art/index.js';
import { artPath, EVENT_PAGES, RELEASE_PAGES, type SiteEntity } from '../entities.js';
import type { ImageUrls } from '../images.js';
import { picture } from './gallery.js';

/** Whose art an edit changes: an event's or a release's, and its MBID (null: none named). */
export function editOwner(edit: Edit): { entity: SiteEntity; gid: string | null } {
  return edit.event !== null ? { entity: EVENT_PAGES, gid: edit.event } : { entity: RELEASE_PAGES, gid: edit.release };
}

/** What an edit does, in the words of its archive: "Add cover art", "Reorder event art". */
function kindText(edit: Edit): string {
  if (edit.kind === 'set-cover') return "Set the release group's cover";
  const verb = { add: 'Add', edit: 'Edit', remove: 'Remove', reorder: 'Reorder' }[edit.kind];
  return `${verb} ${editOwner(edit).entity.word}`;
}

const STATUSES: Record<EditStatus, string> = {
  applied: 'Applied',
  pending: 'Pending (waiting for an approver)',
  approved: 'Approved',
  rejected: 'Rejected',
};

/** A time for people, in UTC: "2026-11-24 18:30 UTC". */
function when(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** Who: a link to the editor's history, or the operator (the CLI). */
function who(person: { name: string } | null): SafeHtml {
  return person === null ? html`the operator` : html`<a href="/user/${encodeURIComponent(person.name)}/edits">${person.name}</a>`;
}

function none(): SafeHtml {
  return html`<span class="muted">none</span>`;
}

/** A `before` or `after` value, readably: fields as a list, an order as a numbered list of image ids. */
function fields(value: unknown): SafeHtml {
  if (value === null || value === undefined || typeof value !== 'object') return none();
  const v = value as Record<string, unknown>;
  const rows: SafeHtml[] = [];
  if (Array.isArray(v.order)) {
    rows.push(html`<dt>Order</dt><dd><ol class="order">${(v.order as unknown[]).map((id) => html`<li>image ${String(id)}</li>`)}</ol></dd>`);
  }
  if (Array.isArray(v.types)) rows.push(html`<dt>Types</dt><dd>${v.types.length > 0 ? (v.types as unknown[]).map(String).join(', ') : none()}</dd>`);
  if (typeof v.comment === 'string') rows.push(html`<dt>Comment</dt><dd>${v.comment !== '' ? v.comment : none()}</dd>`);
  if (typeof v.approved === 'boolean') rows.push(html`<dt>Approved</dt><dd>${v.approved ? 'Yes' : 'No'}</dd>`);
  if (typeof v.edit === 'number') rows.push(html`<dt>MusicBrainz edit</dt><dd>${String(v.edit)}</dd>`);
  if ('release' in v) rows.push(html`<dt>Cover from</dt><dd>${typeof v.release === 'string' ? html`<a href="/release/${v.release}/cover-art">release ${v.release}</a>` : html`<span class="muted">no choice (the rules decide)</span>`}</dd>`);
  return rows.length === 0 ? none() : html`<dl>${rows}</dl>`;
}

/** Text with its line breaks kept (an edit note is typed in a textarea). */
function lines(text: string): SafeHtml {
  return html`${text.split(/\r?\n/).map((line, i) => (i === 0 ? html`${line}` : html`<br>${line}`))}`;
}

/** The start of an edit note, for a history's line. */
function noteExcerpt(text: string): string {
  const flat = text.replace(/\s+/g, ' ');
  return flat.length > 80 ? `${flat.slice(0, 79)}…` : flat;
}

export interface EditView {
  edit: Edit;
  /** The edit's release or event as it is now (its name; a release's group), while it exists. */
  owner: { label: string; group?: { gid: string; name: string } | undefined } | undefined;
  /** The image's file, while it exists. */
  image: { id: number; suffix: string } | undefined;
  /** The forms the viewer may use (a pending edit only). */
  may: { approve: boolean; reject: boolean; withdraw: boolean };
  csrf: string | undefined;
  error?: string | undefined;
  note?: string | undefined;
}

/** An edit's page: what, where, who, when, before and after, its status, and the forms to close it. */
export function editPage(urls: ImageUrls, v: EditView): SafeHtml {
  const { edit } = v;
  const { entity, gid } = editOwner(edit);
  const owner =
    gid === null
      ? none()
      : html`<a href="${artPath(entity, gid)}">${v.owner?.label ?? gid}</a> <span class="muted">${gid}</span> (<a href="/${entity.name}/${gid}/edits">its edits</a>)`;
  const known = v.owner?.group;
  const groupGid = edit.release_group ?? known?.gid;
  const groupName = known !== undefined && known.gid === groupGid && known.name !== '' ? known.name : groupGid;
  const group = groupGid === undefined ? '' : html`<dt>Release group</dt><dd><a href="/release-group/${groupGid}/cover-art">${groupName}</a></dd>`;
  const image =
    edit.image === null
      ? ''
      : html`<dt>Image</dt><dd>${edit.image}${v.image === undefined || gid === null ? html` <span class="muted">(no longer stored)</span>` : html`<div class="thumb">${picture(urls, gid, v.image, `Image ${edit.image}`)}</div>`}</dd>`;
  const closed =
    edit.closed === null || edit.status === 'applied'
      ? ''
      : html`<dt>${edit.status === 'approved' ? 'Approved' : 'Rejected'} by</dt><dd>${edit.closed.by !== null && edit.closed.by.id === edit.editor?.id && edit.status === 'rejected' ? html`${who(edit.closed.by)} (withdrawn)` : who(edit.closed.by)}, ${when(edit.closed.at)}</dd>`;
  const before = edit.kind === 'add' ? '' : html`<h2>Before</h2>${fields(edit.before)}`;
  const after = edit.kind === 'remove' ? html`<h2>After</h2><p>The image is removed.</p>` : html`<h2>After</h2>${fields(edit.after)}`;
  return html`${v.error === undefined ? '' : html`<p class="error" role="alert">${v.error}</p>`}
<dl>
<dt>Kind</dt><dd>${kindText(edit)}</dd>
<dt>${entity.name === 'event' ? 'Event' : 'Release'}</dt><dd>${owner}</dd>
${group}${image}
<dt>Editor</dt><dd>${who(edit.editor)}</dd>
<dt>Made</dt><dd>${when(edit.created)}</dd>
<dt>Status</dt><dd><strong>${STATUSES[edit.status]}</strong></dd>
${closed}
${edit.edit_note === null ? '' : html`<dt>Edit note</dt><dd class="edit-note">${lines(edit.edit_note)}</dd>`}
${edit.note === null || edit.note === '' ? '' : html`<dt>${edit.status === 'approved' ? 'Approver' : edit.closed?.by?.id === edit.editor?.id ? 'Withdrawal' : 'Rejection'} note</dt><dd>${edit.note}</dd>`}
</dl>
${before}${after}
${closeForms(v)}`;
}

function closeForms(v: EditView): SafeHtml | string {
  const { edit, may } = v;
  if (edit.status !== 'pending' || v.csrf === undefined || (!may.approve && !may.reject && !may.withdraw)) return '';
  const id = edit.id;
  const noteField = (form: string) => html`<p><label for="note-${form}">Note (optional)</label><input type="text" id="note-${form}" name="note" maxlength="255" value="${v.note ?? ''}"></p>`;
  const warning =
    edit.kind === 'add' ? html`<p>Rejecting this addition <strong>removes the image and its files</strong>.</p>` : html`<p>Rejecting leaves the ${editOwner(edit).entity.name} as it is; nothing of this edit is applied.</p>`;
  const approve = may.approve
    ? html`<form method="post" action="/edit/${id}/approve" class="decide"><h3>Approve</h3><p>Approving applies the edit${edit.kind === 'add' ? ' (the image becomes approved)' : ''}.</p>
<input type="hidden" name="csrf_token" value="${v.csrf}">${noteField('approve')}<button type="submit">Approve edit #${id}</button></form>`
    : '';
  const reject =
    may.reject || may.withdraw
      ? html`<form method="post" action="/edit/${id}/reject" class="decide"><h3>${may.reject ? 'Reject' : 'Withdraw'}</h3>${warning}
<input type="hidden" name="csrf_token" value="${v.csrf}">${noteField('reject')}<button type="submit" class="danger">${may.reject ? `Reject edit #${id}` : `Withdraw my edit #${id}`}</button></form>`
      : '';
  return html`<h2>Decide</h2>${approve}${reject}`;
}

export interface HistoryView {
  /** What the history is of, e.g. "release X" (for the caption). */
  of: string;
  /** Whose art its edits change, for the caption ("Cover art edits of …"); undefined: either archive's (an editor's history). */
  word?: string | undefined;
  /** The page's own path, without query. */
  path: string;
  edits: Edit[];
  pendingOnly: boolean;
  next: number | null;
  /** Whether to show the release column (an editor's history) or the editor column (a release's). */
  show: 'release' | 'editor';
}

/** The release or event an edit changes, as a link to its gallery. */
function ownerLink(edit: Edit): SafeHtml {
  const { entity, gid } = editOwner(edit);
  return gid === null ? none() : html`<a href="${artPath(entity, gid)}">${entity.name} ${gid}</a>`;
}

/** A history of edits, newest first, a page at a time, with the pending-only filter. */
export function historyPage(v: HistoryView): SafeHtml {
  const filter = v.pendingOnly
    ? html`<p>Showing pending edits only. <a href="${v.path}">Show all edits</a></p>`
    : html`<p><a href="${v.path}?status=pending">Show pending edits only</a></p>`;
  const older = v.next === null ? '' : html`<p><a href="${v.path}?${v.pendingOnly ? 'status=pending&' : ''}before=${String(v.next)}">Older edits</a></p>`;
  if (v.edits.length === 0) return html`${filter}<p>${v.pendingOnly ? 'No pending edits.' : 'No edits.'}</p>`;
  const items = v.edits.map(
    (e) => html`<li><a href="/edit/${String(e.id)}">#${String(e.id)}</a> ${kindText(e)} · ${v.show === 'release' ? ownerLink(e) : who(e.editor)} · ${when(e.created)} · <strong>${STATUSES[e.status]}</strong>${
      e.edit_note === null ? '' : html`<br><span class="muted">Edit note: ${noteExcerpt(e.edit_note)}</span>`
    }</li>`,
  );
  const caption = v.word === undefined ? 'Edits' : `${v.word.charAt(0).toUpperCase()}${v.word.slice(1)} edits`;
  return html`${filter}
<h2>${caption} of ${v.of}, newest first</h2>
<ol class="edits">${items}</ol>
${older}`;
}
