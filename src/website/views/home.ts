import { html, type SafeHtml } from '../../auth/pages.js';
import type { RecentImage } from '../../cover-art/index.js';
import type { ImageUrls } from '../images.js';
import { picture, releaseLabel } from './gallery.js';

/** The search form, with the value tried and why it failed. */
export function searchForm(value: string, error: string | undefined): SafeHtml {
  return html`<form class="stack" method="get" action="/search" role="search">
${error ? html`<p class="error" role="alert" id="search-error">${error}</p>` : ''}
<label>Release or release group MBID<span class="hint">A MusicBrainz ID, or a musicbrainz.org link that contains one</span>
<input type="text" name="mbid" required autocomplete="off" spellcheck="false" autocapitalize="none" value="${value}"${error ? html` aria-describedby="search-error" aria-invalid="true"` : ''}></label>
<div class="actions"><button type="submit">Find cover art</button></div>
</form>`;
}

/** The most recent additions: thumbnails that lead to their galleries, an addition waiting for an approver marked pending (cached: the same for everyone). */
export function recentAdditions(urls: ImageUrls, images: RecentImage[]): SafeHtml {
  if (images.length === 0) return html`<h2>Recent additions</h2><p class="muted">No cover art has been added yet.</p>`;
  return html`<h2>Recent additions</h2>
<ul class="recent">${images.map(
    (i) => html`<li><a href="/release/${i.release}/cover-art#image-${i.id}">${picture(urls, i.release, i, `Cover art of ${releaseLabel({ name: i.releaseName, gid: i.release })}`, '(max-width: 40rem) 45vw, 10rem')}<span>${releaseLabel({ name: i.releaseName, gid: i.release })}${i.approved ? '' : ' (pending approval)'}</span></a></li>`,
  )}</ul>`;
}

/** The account part of the home page (what the authorization service's home page said). */
export function accountPart(signedIn: boolean): SafeHtml {
  return html`<h2>Your account</h2>
<p>sleeve is also an authorization service: applications send you here to ask for access to your account, and you decide what they may do.</p>
${signedIn ? html`<p><a href="/account/applications">Your applications</a>: the ones you authorized, and the ones you develop.</p>` : html`<p><a href="/login">Sign in</a> to manage your applications and to curate cover art.</p>`}`;
}
