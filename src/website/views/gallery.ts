import { html, type SafeHtml } from '../../auth/pages.js';
import { FIRST_EDIT_ID, type EventListingImage, type GroupChoiceReason, type GroupRelease, type ImageWithTypes } from '../../cover-art/index.js';
import type { Dimensions } from '../dimensions.js';
import { artPath, releaseLabel, type SiteEntity } from '../entities.js';
import { fileUrl, sources, type ImageUrls } from '../images.js';
import { formatBytes } from '../respond.js';

export { releaseLabel } from '../entities.js';

export interface GalleryImage {
  row: ImageWithTypes;
  /** Its listing entry: a release's has `back`, an event's not. */
  entry: EventListingImage & { back?: boolean };
  dimensions: Dimensions | undefined;
}

/** The thumbnail of an image, scaled by the browser from the 250/500/1200 thumbnails. */
export function picture(urls: ImageUrls, release: string, image: { id: number; suffix: string }, alt: string, sizes = '(max-width: 40rem) 90vw, 20rem'): SafeHtml {
  const s = sources(urls, release, image);
  return html`<img src="${s.src}" srcset="${s.srcset}" sizes="${sizes}" alt="${alt}" loading="lazy" decoding="async">`;
}

function altText(image: GalleryImage, position: number): string {
  const types = image.row.types.length > 0 ? image.row.types.join(', ') : 'untyped';
  return `Image ${position} (${types})${image.row.comment ? `: ${image.row.comment}` : ''}`;
}

/**
 * Why an image is, or is not, the release's front or back (an event's poster). Under the review
 * policy a pending image is never a cover (the listing's flags say so): one typed Front or Back
 * with no cover of that type before it waits for an approver. A PDF is never an event's poster.
 */
function roleText(entity: SiteEntity, image: GalleryImage, position: number, all: GalleryImage[]): SafeHtml[] {
  const out: SafeHtml[] = [];
  for (const { flag, type, role, notPdf } of entity.covers) {
    if (image.entry[flag] === true) out.push(html`<p class="role"><strong>The ${role}</strong>: the first image typed ${type} in this order.</p>`);
    else if (image.row.types.includes(type)) {
      const first = all.findIndex((i) => i.entry[flag] === true) + 1;
      if (first > 0 && first < position) out.push(html`<p class="role muted">Typed ${type}, but image ${first} comes first, so that one is the ${role}.</p>`);
      else if (notPdf && image.row.mime_type === 'application/pdf') out.push(html`<p class="role muted">Typed ${type}, but a PDF is never the ${role}.</p>`);
      else out.push(html`<p class="role muted">Typed ${type}, but not approved yet: it waits for an approver before it can be the ${role}.</p>`);
    }
  }
  return out;
}

/**
 * The edit that added an image: sleeve's own (from FIRST_EDIT_ID on) has its page here; a
 * smaller number is a MusicBrainz edit (imported art, or `art add --edit N`), whose page is
 * on SLEEVE_MUSICBRAINZ_URL.
 */
function addedBy(urls: ImageUrls, edit: number): SafeHtml {
  if (edit >= FIRST_EDIT_ID) return html`<a href="/edit/${edit}">edit #${edit}</a>`;
  if (edit > 0) return html`<a href="${urls.listing.musicBrainzUrl}/edit/${edit}">MusicBrainz edit #${edit}</a>`;
  return html`<span class="muted">no edit recorded</span>`;
}

function imageCard(urls: ImageUrls, entity: SiteEntity, gid: string, image: GalleryImage, position: number, all: GalleryImage[], editor: boolean): SafeHtml {
  const { row, entry } = image;
  const original = { id: row.id, suffix: row.suffix };
  // The listing's measured fields first (as displayed, the stored size), else what the page read itself.
  const bytes = entry.size ?? row.filesize;
  const size = bytes === null || bytes === undefined ? 'unknown' : formatBytes(bytes);
  const shown = entry.width !== undefined && entry.height !== undefined ? { width: entry.width, height: entry.height } : image.dimensions;
  const dims = shown === undefined ? 'unknown' : `${shown.width} × ${shown.height} px`;
  return html`<li class="art" id="image-${row.id}">
<a class="thumb" href="${fileUrl(urls, gid, original)}">${picture(urls, gid, original, altText(image, position))}</a>
<h2>Image ${position}</h2>
${roleText(entity, image, position, all)}
<dl>
<dt>Types</dt><dd>${row.types.length > 0 ? row.types.join(', ') : html`<span class="muted">none</span>`}</dd>
<dt>Comment</dt><dd>${row.comment !== '' ? row.comment : html`<span class="muted">none</span>`}</dd>
<dt>Approved</dt><dd>${entry.approved ? 'Yes' : 'No (pending)'}</dd>
<dt>Added by</dt><dd>${addedBy(urls, entry.edit)}</dd>
<dt>Size</dt><dd>${dims}, ${size}</dd>
<dt>Files</dt><dd class="files"><a href="${entry.image}">original</a> <a href="${entry.thumbnails['250']}">250 px</a> <a href="${entry.thumbnails['500']}">500 px</a> <a href="${entry.thumbnails['1200']}">1200 px</a></dd>
</dl>
${editor ? html`<p class="actions"><a class="action" href="${artPath(entity, gid, 'edit', row.id)}">Edit image ${position}</a><a class="action" href="${artPath(entity, gid, 'remove', row.id)}">Remove image ${position}</a></p>` : ''}
</li>`;
}

/** What a gallery is of: a release or an event, its MBID, and what the page says of it first (a release's group and date). */
export interface GalleryOwner {
  entity: SiteEntity;
  gid: string;
  about: SafeHtml | '';
}

/** The gallery of a release or an event, inside the layout (the same for every viewer of a kind: cached). */
export function artGallery(urls: ImageUrls, owner: GalleryOwner, images: GalleryImage[], editor: boolean): SafeHtml {
  const { entity, gid, about } = owner;
  const tools = editor
    ? html`<p class="actions"><a class="action" href="${artPath(entity, gid, 'add')}">Add ${entity.word}</a>${images.length > 1 ? html`<a class="action" href="${artPath(entity, gid, 'reorder')}">Reorder ${entity.word}</a>` : ''}</p>`
    : '';
  if (images.length === 0) {
    return html`${about}<p>There is no ${entity.word} for this ${entity.name} yet.</p>
${editor ? tools : html`<p><a href="/login?return_to=${encodeURIComponent(artPath(entity, gid))}">Sign in</a> to add some.</p>`}`;
  }
  return html`${about}${tools}
<p>${images.length === 1 ? '1 image' : `${images.length} images`}, in the order the ${entity.word} API lists them.</p>
<ol class="gallery">${images.map((image, i) => imageCard(urls, entity, gid, image, i + 1, images, editor))}</ol>`;
}

const REASONS: Record<GroupChoiceReason, string> = {
  only: 'it is the only release of the group with a front cover.',
  chosen: 'an editor chose it for the group.',
  'not-raw': 'its front cover is not typed Raw/Unedited, and the others’ are.',
  earliest: 'it has the earliest release date among the releases with a front cover.',
  tie: 'the releases with a front cover tie on everything else, and it was added first.',
};

export interface GroupView {
  gid: string;
  name: string;
  chosen: { release: GroupRelease; reason: GroupChoiceReason } | undefined;
  releases: GroupRelease[];
}

/** The group's page: the chosen art, where it comes from and why, and the group's releases. */
export function groupGallery(urls: ImageUrls, group: GroupView, editor: boolean): SafeHtml {
  const list = html`<h2>Releases in this group</h2><ul class="releases">${group.releases.map(
    (r) => html`<li><a href="/release/${r.gid}/cover-art">${releaseLabel(r)}</a>${r.date ? html` <span class="muted">(${r.date})</span>` : ''}${r.front ? '' : html` <span class="muted">· no front cover</span>`}</li>`,
  )}</ul>`;
  const tools = editor && group.releases.some((r) => r.front) ? html`<p class="actions"><a class="action" href="/release-group/${group.gid}/set-cover-art">Choose the group's cover</a></p>` : '';
  if (group.chosen === undefined || group.chosen.release.front === undefined) {
    return html`<p>No release of this group has a front cover yet, so the group has no cover art.</p>${list}`;
  }
  const { release, reason } = group.chosen;
  const front = release.front as { id: number; suffix: string };
  return html`<figure class="group-cover">
<a href="/release/${release.gid}/cover-art">${picture(urls, release.gid, front, `Front cover of ${releaseLabel(release)}`, '(max-width: 40rem) 90vw, 30rem')}</a>
<figcaption>The front cover of <a href="/release/${release.gid}/cover-art">${releaseLabel(release)}</a>${release.date ? ` (${release.date})` : ''}.</figcaption>
</figure>
<p class="reason">This release represents the group because ${REASONS[reason]}</p>
${tools}${list}`;
}
