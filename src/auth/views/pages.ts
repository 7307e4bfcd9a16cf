import { registeredRedirectUris, type Application } from '../applications.js';
import type { UserGrant } from '../user-grants.js';
import { scopeTexts } from '../scopes.js';
import { html, SafeHtml } from './html.js';
import { page } from './layout.js';

export interface Viewer {
  name: string;
  csrf: string;
}

export function loginPage(opts: { csrf: string; returnTo: string; error?: string; notice?: string; name?: string | undefined }): string {
  const body = html`${opts.notice ? html`<p>${opts.notice}</p>` : ''}
${opts.error ? html`<p class="error" role="alert">${opts.error}</p>` : ''}
<form class="stack" method="post" action="/login">
<input type="hidden" name="csrf_token" value="${opts.csrf}">
<input type="hidden" name="return_to" value="${opts.returnTo}">
<label>User name<input type="text" name="username" autocomplete="username" autocapitalize="none" spellcheck="false" required value="${opts.name ?? ''}"></label>
<label>Password<input type="password" name="password" autocomplete="current-password" required></label>
<div class="actions"><button type="submit">Sign in</button></div>
</form>`;
  return page({ title: 'Sign in', body });
}

/** A consent page's Allow / No thanks form (the device's consent page has the same). */
export function consentForm(csrf: string): SafeHtml {
  return html`<form method="post" name="confirm">
<input type="hidden" name="csrf_token" value="${csrf}">
<div class="actions">
<button type="submit" name="decision" value="allow">Allow access</button>
<button type="submit" name="decision" value="deny" class="secondary">No thanks</button>
</div>
</form>`;
}

/** The consent page of an authorization request (`redirectHost`: where the answer goes). */
export function consentPage(opts: {
  viewer: Viewer;
  app: Application;
  scope: number;
  offlineBullet: boolean;
  redirectHost?: string;
  error?: string;
  /** A client known by its metadata document: where the document is (and the page it names, if any). */
  document?: { host: string; url: string; clientUri: string | undefined } | undefined;
}): string {
  const items = scopeTexts(opts.scope).map((t) => html`<li>${t}</li>`);
  if (opts.offlineBullet) items.push(html`<li>Perform the above operations when I'm not using the application</li>`);
  const doc = opts.document;
  // The host is the one fact about such a client that its document cannot make up: it goes first, and large.
  const unregistered =
    doc === undefined
      ? ''
      : html`<h2 class="client-host">${doc.host}</h2>
<p class="caution" role="note">This application is <strong>not registered here</strong>. It describes itself in a document at <code>${doc.url}</code>; the name below is what that document says. Allow it only if you trust <strong>${doc.host}</strong>.${doc.clientUri !== undefined ? html` Its page: <code>${doc.clientUri}</code>.` : ''}</p>`;
  const body = html`${opts.error ? html`<p class="error" role="alert">${opts.error}</p>` : ''}${unregistered}
<p><strong>${opts.app.name}</strong>${doc === undefined ? '' : html` (from ${doc.host})`} is requesting permission to:</p>
<ul class="scopes">${items.length > 0 ? items : html`<li class="muted">nothing beyond knowing that you use it</li>`}</ul>
<p class="muted">${opts.redirectHost !== undefined ? html`You will be sent back to <code>${opts.redirectHost}</code>. ` : ''}You can revoke access at any time on your <a href="/account/applications">applications page</a>.</p>
${consentForm(opts.viewer.csrf)}`;
  return page({ title: 'OAuth authorization', body, user: opts.viewer.name, csrf: opts.viewer.csrf });
}

/** An error page; `blame` adds that the application that sent the user here made the bad request. */
export function errorPage(opts: { error: string; description: string; viewer?: Viewer | undefined; blame?: boolean }): string {
  const body = html`<p class="error" role="alert"><strong>Error: ${opts.error}</strong></p>
<p>${opts.description}</p>
${opts.blame === true ? html`<p class="muted">The application that sent you here made a request sleeve cannot accept. Nothing was shared with it.</p>` : ''}`;
  return page({ title: 'OAuth authorization error', body, user: opts.viewer?.name, csrf: opts.viewer?.csrf });
}

export function oobPage(opts: { appName: string; code: string; state?: string; viewer: Viewer }): string {
  const body = html`<h2>Success!</h2>
<p>You have granted access to <strong>${opts.appName}</strong>. Next, return to ${opts.appName} and copy this token to complete the authorization process:</p>
<p><code id="code">${opts.code}</code></p>
${opts.state !== undefined ? html`<p class="muted">State: <code>${opts.state}</code></p>` : ''}`;
  return page({ title: 'Authorization code', body, user: opts.viewer.name, csrf: opts.viewer.csrf });
}

/** After "No thanks" on an out-of-band request: the user's own choice, so nothing is anyone's fault. */
export function declinedPage(opts: { appName: string; viewer: Viewer }): string {
  const body = html`<p role="status">You did not give <strong>${opts.appName}</strong> access to your account, and nothing was shared with it.</p>
<p>You can close this page. If you change your mind, start again from ${opts.appName}.</p>`;
  return page({ title: 'Authorization declined', body, user: opts.viewer.name, csrf: opts.viewer.csrf });
}

/**
 * "Sign out of sleeve?" for a client's logout request that does not show it is this user's
 * (RP-Initiated Logout §2): its form POSTs to the end_session_endpoint with the CSRF token and
 * where to go after.
 */
export function logoutConfirmPage(opts: { viewer: Viewer; appName: string | undefined; fields: Record<string, string | undefined>; error?: string | undefined }): string {
  const hidden = Object.entries(opts.fields)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`);
  const body = html`${opts.error ? html`<p class="error" role="alert">${opts.error}</p>` : ''}
<p>${opts.appName !== undefined ? html`<strong>${opts.appName}</strong> asks to sign you out of sleeve.` : 'A request asks to sign you out of sleeve.'} Do you want to sign out?</p>
<p class="muted">You are signed in as <strong>${opts.viewer.name}</strong>. Applications you authorized keep their access; revoke it on your <a href="/account/applications">applications page</a>.</p>
<form method="post" action="/oauth2/logout">
<input type="hidden" name="csrf_token" value="${opts.viewer.csrf}">${hidden}
<div class="actions"><button type="submit">Sign out</button><a class="action" href="/account/applications">Stay signed in</a></div>
</form>`;
  return page({ title: 'Sign out', body, user: opts.viewer.name, csrf: opts.viewer.csrf });
}

/** After a client's logout request without a place to return to. */
export function signedOutPage(opts: { viewer: Viewer | undefined }): string {
  const body =
    opts.viewer === undefined
      ? html`<p role="status">You are signed out of sleeve.</p><p><a href="/login">Sign in again</a></p>`
      : html`<p role="status">You are signed in as <strong>${opts.viewer.name}</strong>.</p>`;
  return page({ title: opts.viewer === undefined ? 'Signed out' : 'Signed in', body, user: opts.viewer?.name, csrf: opts.viewer?.csrf });
}

/** The inline script of the form_post page; its hash goes in that page's CSP. */
export const FORM_POST_SCRIPT = 'document.forms[0].submit();';

export function formPostPage(opts: { appName: string; action: string; fields: Record<string, string | undefined> }): string {
  const inputs = Object.entries(opts.fields)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`);
  return html`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Redirecting to ${opts.appName}</title></head>
<body>
<form action="${opts.action}" method="post">${inputs}<noscript><p>Redirecting to ${opts.appName}…</p></noscript><button type="submit">Continue</button></form>
<script>${new SafeHtml(FORM_POST_SCRIPT)}</script>
</body>
</html>
`.value;
}

function dateText(ms: number): string {
  return new Date(ms).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
}

export interface ShownSecret {
  appName: string;
  clientId: string;
  secret: string;
}

function scopeList(scope: number, offline: boolean): SafeHtml {
  return html`<ul class="scopes">${scopeTexts(scope).map((t) => html`<li>${t}</li>`)}${offline ? html`<li>Offline access: it can act for you when you are not using it</li>` : ''}</ul>`;
}

export function applicationsPage(opts: { viewer: Viewer; grants: UserGrant[]; apps: Application[]; notice?: string | undefined; secret?: ShownSecret | undefined }): string {
  const grants =
    opts.grants.length === 0
      ? html`<p class="muted">You have not authorized any applications.</p>`
      : opts.grants.map(
          (g) => html`<div class="card"><h3>${g.appName}</h3>
${g.documentHost === undefined ? '' : html`<p class="muted">From <strong>${g.documentHost}</strong>: not registered here (known by its metadata document)</p>`}
${scopeList(g.scope, g.offline)}
<p class="muted">Granted ${dateText(g.createdAt)}${g.offline ? ' · offline' : ' · online'}</p>
<div class="actions"><a class="action" href="/account/applications/revoke/${g.id}">Revoke access</a></div></div>`,
        );
  const secret = opts.secret
    ? html`<div class="notice" role="status"><p><strong>${opts.secret.appName}</strong>: copy the client secret now; it is shown only once.</p>
<dl><dt>Client ID</dt><dd><code>${opts.secret.clientId}</code></dd><dt>Client secret</dt><dd><code>${opts.secret.secret}</code></dd></dl></div>`
    : '';
  const apps =
    opts.apps.length === 0
      ? html`<p class="muted">You do not have any registered applications.</p>`
      : opts.apps.map(
          (a) => html`<div class="card"><h3>${a.name}</h3>
<dl><dt>Type</dt><dd>${a.kind === 'confidential' ? 'Confidential (web application)' : 'Public (installed application)'}</dd>
<dt>Client ID</dt><dd><code>${a.client_id}</code></dd>
<dt>Redirect URLs</dt><dd>${a.redirect_uri === null ? html`<span class="muted">none (out-of-band and loopback only)</span>` : registeredRedirectUris(a).map((u, i) => html`${i > 0 ? new SafeHtml('<br>') : ''}<code>${u}</code>`)}</dd>
<dt>ID tokens</dt><dd>signed ${a.id_token_alg}</dd>
<dt>Refresh tokens</dt><dd>${a.rotate_refresh === 1 ? 'a new one on every refresh (a reused one ends the authorization)' : 'last until revoked'}</dd>
${a.resource_server === 1 ? html`<dt>Resource server</dt><dd>may introspect every application's tokens</dd>` : ''}</dl>
<div class="actions"><a class="action" href="/account/applications/edit/${a.id}">Edit</a>
<a class="action" href="/account/applications/reset-secret/${a.id}">Reset secret</a>
<a class="action" href="/account/applications/remove/${a.id}">Remove</a></div></div>`,
        );
  const body = html`${opts.notice ? html`<p class="notice" role="status">${opts.notice}</p>` : ''}${secret}
<h2>Authorized applications</h2>
<p>These applications can act for you with the permissions listed. Revoking ends their access at once.</p>
${grants}
<h2>Developer applications</h2>
<div class="actions"><a class="action" href="/account/applications/register">Register an application</a></div>
${apps}`;
  return page({ title: 'Applications', body, user: opts.viewer.name, csrf: opts.viewer.csrf });
}

export function applicationFormPage(opts: {
  viewer: Viewer;
  mode: 'register' | 'edit';
  action: string;
  values: { name?: string; kind?: string; redirectUri?: string; idTokenAlg?: string; rotateRefresh?: boolean };
  error?: string;
}): string {
  const kind = opts.values.kind ?? 'confidential';
  const alg = opts.values.idTokenAlg ?? 'RS256';
  const algOption = (value: string, text: string) => html`<option value="${value}"${alg === value ? new SafeHtml(' selected') : ''}>${text}</option>`;
  const kindField =
    opts.mode === 'register'
      ? html`<label>Type<select name="kind">
<option value="confidential"${kind === 'confidential' ? new SafeHtml(' selected') : ''}>Confidential: a web application that keeps its secret on a server</option>
<option value="public"${kind === 'public' ? new SafeHtml(' selected') : ''}>Public: an installed or in-browser application</option>
</select></label>`
      : html`<p><strong>Type:</strong> ${kind === 'confidential' ? 'Confidential (web application)' : 'Public (installed application)'}</p>`;
  const body = html`${opts.error ? html`<p class="error" role="alert">${opts.error}</p>` : ''}
<form class="stack" method="post" action="${opts.action}">
<input type="hidden" name="csrf_token" value="${opts.viewer.csrf}">
<label>Name<input type="text" name="name" required maxlength="100" value="${opts.values.name ?? ''}"></label>
${kindField}
<label>Redirect URLs<input type="text" name="redirect_uri" inputmode="url" autocapitalize="none" spellcheck="false" value="${opts.values.redirectUri ?? ''}">
<span class="hint">Several may be given, separated by spaces. Required for confidential applications (https; http only for localhost). Optional for public ones: a reverse-DNS scheme such as org.example.app://auth; out-of-band (urn:ietf:wg:oauth:2.0:oob) and http://localhost, http://127.0.0.1, http://[::1] need no registration. Registered loopback URLs match on any port.</span></label>
<label>OpenID Connect id_token signing<select name="id_token_alg">
${algOption('RS256', 'RS256 (the default OpenID Connect clients expect)')}
${algOption('ES256', 'ES256 (as today\'s MetaBrainz signs)')}
</select><span class="hint">Only matters for clients that ask for the openid scope.</span></label>
<label class="check"><input type="checkbox" name="rotate_refresh" value="on"${opts.values.rotateRefresh === true ? new SafeHtml(' checked') : ''}>Rotate refresh tokens
<span class="hint">A new refresh token on every refresh; the client must keep the newest. A used one sent again ends the authorization (unless it comes again within seconds, as a retry does).</span></label>
<div class="actions"><button type="submit">${opts.mode === 'register' ? 'Register application' : 'Update'}</button><a class="action" href="/account/applications">Cancel</a></div>
</form>`;
  return page({ title: opts.mode === 'register' ? 'Register an application' : 'Edit application', body, user: opts.viewer.name, csrf: opts.viewer.csrf });
}

/**
 * "Are you sure…?" before a destructive action: GET shows this page, its form POSTs to the
 * same URL with the CSRF token, and only that POST acts (then redirects).
 */
function confirmPage(opts: { viewer: Viewer; title: string; question: SafeHtml; details?: SafeHtml; action: string; confirmLabel: string; error?: string | undefined }): string {
  const body = html`${opts.error ? html`<p class="error" role="alert">${opts.error}</p>` : ''}
<p>${opts.question}</p>
${opts.details ?? ''}
<form method="post" action="${opts.action}">
<input type="hidden" name="csrf_token" value="${opts.viewer.csrf}">
<div class="actions"><button type="submit" class="danger">${opts.confirmLabel}</button><a class="action" href="/account/applications">Cancel</a></div>
</form>`;
  return page({ title: opts.title, body, user: opts.viewer.name, csrf: opts.viewer.csrf });
}

export function confirmRevokePage(opts: { viewer: Viewer; grant: UserGrant; error?: string | undefined }): string {
  return confirmPage({
    viewer: opts.viewer,
    title: 'Revoke access',
    question: html`Are you sure you want to revoke the access of <strong>${opts.grant.appName}</strong> to your account? It loses these permissions at once:`,
    details: scopeList(opts.grant.scope, opts.grant.offline),
    action: `/account/applications/revoke/${opts.grant.id}`,
    confirmLabel: 'Revoke access',
    error: opts.error,
  });
}

export function confirmRemovePage(opts: { viewer: Viewer; app: Application; error?: string | undefined }): string {
  return confirmPage({
    viewer: opts.viewer,
    title: 'Remove application',
    question: html`Are you sure you want to remove <strong>${opts.app.name}</strong>?`,
    details: html`<p>Its client ID and secret stop working, and every authorization users gave it ends, with its tokens. This cannot be undone.</p>`,
    action: `/account/applications/remove/${opts.app.id}`,
    confirmLabel: 'Remove application',
    error: opts.error,
  });
}

export function confirmResetPage(opts: { viewer: Viewer; app: Application; error?: string | undefined }): string {
  return confirmPage({
    viewer: opts.viewer,
    title: 'Reset client secret',
    question: html`Are you sure you want to reset the client secret of <strong>${opts.app.name}</strong>?`,
    details: html`<p>The current secret stops working at once. The new one is shown to you once, on the next page.</p>`,
    action: `/account/applications/reset-secret/${opts.app.id}`,
    confirmLabel: 'Reset secret',
    error: opts.error,
  });
}
