import type { Application } from '../applications.js';
import { scopeTexts } from '../scopes.js';
import { html } from './html.js';
import { page } from './layout.js';
import { consentForm, type Viewer } from './pages.js';

/**
 * The consent of the device flow, which a link can lead to (verification_uri_complete): so it
 * says first, plainly, to refuse unless the user started the sign-in on a device in front of
 * them (someone who sends the link or the code is after the account: device code phishing),
 * names the application, and says that the access lasts until revoked (device grants are offline).
 */
export function deviceConsentPage(opts: { viewer: Viewer; app: Application; scope: number; userCode: string; error?: string | undefined }): string {
  const items = scopeTexts(opts.scope).map((t) => html`<li>${t}</li>`);
  items.push(html`<li>Keep this access when you are not using it</li>`);
  const body = html`${opts.error !== undefined ? html`<p class="error" role="alert">${opts.error}</p>` : ''}
<div class="caution">
<p><strong>Only continue if you started signing in on a device that is in front of you right now.</strong></p>
<p>If someone sent you this link or the code, or asked you to enter it, choose "No thanks": whoever started this would get access to your account.</p>
</div>
<p>The application <strong>${opts.app.name}</strong> is requesting permission to:</p>
<ul class="scopes">${items}</ul>
<p>Check that your device shows the code <code>${opts.userCode}</code>.</p>
<p>If you allow it, <strong>the access lasts until you revoke it</strong>, on your <a href="/account/applications">applications page</a>: the device does not have to ask you again.</p>
${consentForm(opts.viewer.csrf)}`;
  return page({ title: 'Connect a device', body, user: opts.viewer.name, csrf: opts.viewer.csrf });
}

/** The form where a signed-in user types the code a device shows (a GET form: looking a code up changes nothing). */
export function deviceEntryPage(opts: { viewer: Viewer; userCode?: string; error?: string | undefined }): string {
  const body = html`<p>Enter the code shown on the device or application you are connecting to your account.</p>
${opts.error !== undefined ? html`<p class="error" role="alert" id="code-error">${opts.error}</p>` : ''}
<form class="stack" method="get" action="/oauth2/device">
<label>Code <span class="hint">8 letters, as shown, e.g. BCDF-GHJK</span><input type="text" name="user_code" value="${opts.userCode ?? ''}" required autocomplete="one-time-code" autocapitalize="characters" spellcheck="false" maxlength="20"${opts.error !== undefined ? html` aria-invalid="true" aria-describedby="code-error"` : ''}></label>
<div class="actions"><button type="submit">Continue</button></div>
</form>`;
  return page({ title: 'Connect a device', body, user: opts.viewer.name, csrf: opts.viewer.csrf });
}

/** After the decision (Post/Redirect/Get): what the user decided. */
export function deviceDonePage(opts: { viewer: Viewer; appName: string; approved: boolean }): string {
  const body = opts.approved
    ? html`<p role="status">You gave <strong>${opts.appName}</strong> access to your account.</p>
<p>Return to your device: it finishes signing in by itself. You can revoke access at any time on your <a href="/account/applications">applications page</a>.</p>`
    : html`<p role="status">You did not give <strong>${opts.appName}</strong> access to your account, and nothing was shared with it.</p>
<p>You can close this page.</p>`;
  return page({ title: opts.approved ? 'Device connected' : 'Device not connected', body, user: opts.viewer.name, csrf: opts.viewer.csrf });
}
