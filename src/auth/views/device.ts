import { html } from './html.js';
import { page } from './layout.js';
import type { Viewer } from './pages.js';

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
