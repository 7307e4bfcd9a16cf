import { html, type SafeHtml } from '../../auth/pages.js';
import type { RecentImage } from '../../cover-art/index.js';
import type { ImageUrls } from '../images.js';
import { artPath, EVENT_PAGES, RELEASE_PAGES } from '../entities.js';
import { picture, releaseLabel } from './gallery.js';

/** The search form, with the value tried and why it failed. */
export function searchForm(value: string, error: string | undefined): SafeHtml {
  return html`<form class="stack" method="get" action="/search" role="search">
${error ? html`<p class="error" role="alert" id="search-error">${error}</p>` : ''}
<label>Release, release group or event MBID<span class="hint">A MusicBrainz ID, or a musicbrainz.org link that contains one</span>
<input type="text" name="mbid" required autocomplete="off" spellcheck="false" autocapitalize="none" value="${value}"${error ? html` aria-describedby="search-error" aria-invalid="true"` : ''}></label>
<div class="actions"><button type="submit">Find art</button></div>
</form>`;
}

/** An addition's name on the page and its image's alt text: its release's, or its event's. */
function describeRecent(i: RecentImage): { label: string; alt: string; href: string } {
  if (i.entity === 'event') {
    const label = i.ownerName === '' ? `Event ${i.owner}` : i.ownerName;
    return { label, alt: `Event art of ${label}`, href: `${artPath(EVENT_PAGES, i.owner)}#image-${i.id}` };
  }
  const label = releaseLabel({ name: i.ownerName, gid: i.owner });
  return { label, alt: `Cover art of ${label}`, href: `${artPath(RELEASE_PAGES, i.owner)}#image-${i.id}` };
}

/**
 * The most recent additions of both archives: thumbnails that lead to their galleries (a
 * release's or an event's), an addition waiting for an approver marked pending (cached: the
 * same for everyone).
 */
export function recentAdditions(urls: ImageUrls, images: RecentImage[]): SafeHtml {
  if (images.length === 0) return html`<h2>Recent additions</h2><p class="muted">No art has been added yet.</p>`;
  return html`<h2>Recent additions</h2>
<ul class="recent">${images.map((i) => {
    const d = describeRecent(i);
    return html`<li><a href="${d.href}">${picture(urls, i.owner, i, d.alt, '(max-width: 40rem) 45vw, 10rem')}<span>${d.label}${i.entity === 'event' ? html` <span class="muted">(event)</span>` : ''}${i.approved ? '' : ' (pending approval)'}</span></a></li>`;
  })}</ul>`;
}

/** The account part of the home page (what the authorization service's home page said). */
export function accountPart(signedIn: boolean): SafeHtml {
  return html`<h2>Your account</h2>
<p>sleeve is also an authorization service: applications send you here to ask for access to your account, and you decide what they may do.</p>
${signedIn ? html`<p><a href="/account/applications">Your applications</a>: the ones you authorized, and the ones you develop.</p>` : html`<p><a href="/login">Sign in</a> to manage your applications and to curate cover art.</p>`}`;
}
