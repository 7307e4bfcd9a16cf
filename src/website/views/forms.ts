import { html, type SafeHtml } from '../../auth/pages.js';
import type { GroupRelease, ImageWithTypes } from '../../cover-art/index.js';
import { artPath, type SiteEntity } from '../entities.js';
import type { ImageUrls } from '../images.js';
import { picture, releaseLabel } from './gallery.js';

function problem(error: string | undefined): SafeHtml | string {
  return error ? html`<p class="error" role="alert">${error}</p>` : '';
}

function csrfField(csrf: string): SafeHtml {
  return html`<input type="hidden" name="csrf_token" value="${csrf}">`;
}

function describe(image: ImageWithTypes, position: number): string {
  return `Image ${position} (${image.types.length > 0 ? image.types.join(', ') : 'untyped'})`;
}

/** Whose image a form changes: a release's or an event's, by MBID. */
interface Owned {
  entity: SiteEntity;
  gid: string;
}

export interface EditForm extends Owned {
  image: ImageWithTypes;
  position: number;
  artTypes: { id: number; name: string }[];
  /** The values shown: the image's, or those posted. */
  types: string[];
  comment: string;
  /** The fingerprint of the image as the form was made from it. */
  state: string;
  csrf: string;
  error?: string;
}

/** Types (one checkbox each) and comment of one image. */
export function editForm(urls: ImageUrls, f: EditForm): SafeHtml {
  const checked = new Set(f.types.map((t) => t.toLowerCase()));
  return html`${problem(f.error)}
<div class="edit-preview">${picture(urls, f.gid, f.image, describe(f.image, f.position), '10rem')}</div>
<form class="stack" method="post" action="${artPath(f.entity, f.gid, 'edit', f.image.id)}">
${csrfField(f.csrf)}<input type="hidden" name="state" value="${f.state}">
<fieldset class="types"><legend>Types</legend>
${f.artTypes.map((t) => html`<label class="check"><input type="checkbox" name="type" value="${t.name}"${checked.has(t.name.toLowerCase()) ? html` checked` : ''}> ${t.name}</label>`)}
</fieldset>
<label>Comment<span class="hint">Free text shown with the image, such as “disc 2” or “obi”</span><input type="text" name="comment" maxlength="255" value="${f.comment}"></label>
<div class="actions"><button type="submit">Save changes</button><a class="action" href="${artPath(f.entity, f.gid)}">Cancel</a></div>
</form>`;
}

/** The confirmation before removing an image. */
export function removeForm(urls: ImageUrls, f: Owned & { image: ImageWithTypes; position: number; csrf: string; error?: string }): SafeHtml {
  return html`${problem(f.error)}
<div class="edit-preview">${picture(urls, f.gid, f.image, describe(f.image, f.position), '10rem')}</div>
<p>Remove <strong>${describe(f.image, f.position)}</strong>${f.image.comment ? ` (“${f.image.comment}”)` : ''} from this ${f.entity.name}? Its files and thumbnails go with it; this cannot be undone.</p>
<form class="actions" method="post" action="${artPath(f.entity, f.gid, 'remove', f.image.id)}">
${csrfField(f.csrf)}<button class="danger" type="submit">Remove image ${f.position}</button><a class="action" href="${artPath(f.entity, f.gid)}">Keep it</a>
</form>`;
}

export interface ReorderForm extends Owned {
  /** In the proposed order. */
  images: ImageWithTypes[];
  /** The ids in the order the listing had when the form was first made. */
  previous: string;
  /** The image just moved (focus returns to its button). */
  moved?: { id: number; direction: 'up' | 'down' };
  csrf: string;
  error?: string;
}

/**
 * The order of a release's (or an event's) images. Without script: Move up/down buttons (a GET
 * form that only proposes an order), then Save (the POST). With script (same origin), the items
 * are also dragged; either way the hidden order fields carry the proposed order.
 */
export function reorderForm(urls: ImageUrls, f: ReorderForm): SafeHtml {
  const order = f.images.map((i) => i.id).join(',');
  const action = artPath(f.entity, f.gid, 'reorder');
  const [front] = f.entity.covers;
  const n = f.images.length;
  const item = (image: ImageWithTypes, i: number) => {
    const focus = (d: 'up' | 'down') => (f.moved?.id === image.id && f.moved.direction === d ? html` autofocus` : '');
    return html`<li class="reorder-item" data-id="${image.id}">
${picture(urls, f.gid, image, describe(image, i + 1), '6rem')}
<span class="reorder-label">${describe(image, i + 1)}${image.comment ? html` <span class="muted">${image.comment}</span>` : ''}</span>
<span class="reorder-moves"><button class="secondary" type="submit" name="move" value="up:${image.id}"${i === 0 ? html` disabled` : ''}${focus('up')}>Move up<span class="visually-hidden"> image ${i + 1}</span></button>
<button class="secondary" type="submit" name="move" value="down:${image.id}"${i === n - 1 ? html` disabled` : ''}${focus('down')}>Move down<span class="visually-hidden"> image ${i + 1}</span></button></span>
</li>`;
  };
  return html`${problem(f.error)}
<p>Move images with the buttons (or drag them), then save.${front === undefined ? '' : ` The first image typed ${front.type} becomes the ${f.entity.name}'s ${front.role}.`}</p>
<form method="get" action="${action}" id="reorder-moves">
<input type="hidden" name="order" value="${order}"><input type="hidden" name="previous" value="${f.previous}">
<ol class="reorder" id="reorder-list">${f.images.map(item)}</ol>
</form>
<p id="reorder-status" class="visually-hidden" role="status" aria-live="polite"></p>
<form method="post" action="${action}" class="actions">
${csrfField(f.csrf)}<input type="hidden" name="order" value="${order}"><input type="hidden" name="previous" value="${f.previous}">
<button type="submit">Save order</button><a class="action" href="${artPath(f.entity, f.gid)}">Cancel</a>
</form>
<script src="/static/reorder.js" defer></script>`;
}

/** The choice of the release whose art represents the group. */
export function setCoverForm(urls: ImageUrls, f: { group: string; releases: GroupRelease[]; selected: string | undefined; previous: string; csrf: string; error?: string }): SafeHtml {
  const usable = f.releases.filter((r) => r.front !== undefined);
  const others = f.releases.length - usable.length;
  return html`${problem(f.error)}
<form class="stack" method="post" action="/release-group/${f.group}/set-cover-art">
${csrfField(f.csrf)}<input type="hidden" name="previous" value="${f.previous}">
<fieldset class="choices"><legend>The release whose front cover represents the group</legend>
${usable.map(
  (r) => html`<label class="choice"><input type="radio" name="release" value="${r.gid}" required${r.gid === f.selected ? html` checked` : ''}>
${picture(urls, r.gid, r.front as { id: number; suffix: string }, '', '5rem')}<span>${releaseLabel(r)}${r.date ? html` <span class="muted">(${r.date})</span>` : ''}</span></label>`,
)}
</fieldset>
${others > 0 ? html`<p class="muted">${others === 1 ? '1 release' : `${others} releases`} of the group without a front cover cannot be chosen.</p>` : ''}
<div class="actions"><button type="submit">Use this release's cover</button><a class="action" href="/release-group/${f.group}/cover-art">Cancel</a></div>
</form>`;
}
