import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server as HttpServer } from 'node:http';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import { chromium, type BrowserContext, type Browser as PwBrowser, type Page } from 'playwright-core';
import { addApp, addUser, PASSWORD, request, startAuthServer, token, type AuthServer } from '../helpers/auth.js';
import { DIALECT, freePort, makeTestEnv, type TestEnv } from '../helpers/env.js';

const CHROMIUM = process.env.SLEEVE_TEST_CHROMIUM ?? '/usr/bin/chromium';
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** axe-core's WCAG 2.2 A/AA rules and best practices: the violations on the page, one line each. */
const AXE_RUN = `axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] } })
  .then((r) => r.violations.map((v) => v.id + ' (' + v.impact + '): ' + v.nodes.map((n) => n.target.join(' ')).join(', ')))`;

/** Controls smaller than 44 × 44 CSS px; links inside running text (a paragraph or list item) are exempt, as WCAG's inline exception says. */
const SMALL_TARGETS = `[...document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea')]
  .filter((el) => el.getClientRects().length > 0 && !(el.tagName === 'A' && el.closest('p, li')))
  .map((el) => { const r = el.getBoundingClientRect(); return { el: el.outerHTML.slice(0, 80), w: r.width, h: r.height }; })
  .filter((t) => t.w < 44 || t.h < 44)`;

/** Form fields whose border has less than 3:1 contrast with what is behind them. */
const FAINT_BORDERS = `(() => {
  const lum = (c) => { const [r, g, b] = c.match(/[\\d.]+/g).slice(0, 3).map((v) => { v = Number(v) / 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const behind = (el) => { for (let e = el.parentElement; e; e = e.parentElement) { const c = getComputedStyle(e).backgroundColor; if (c !== 'transparent' && !/, 0\\)$/.test(c)) return c; } return 'rgb(255, 255, 255)'; };
  return [...document.querySelectorAll('input:not([type=hidden]), select, textarea')].map((el) => {
    const a = lum(getComputedStyle(el).borderTopColor), b = lum(behind(el));
    return { name: el.name, ratio: Math.round(((Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)) * 100) / 100 };
  }).filter((f) => f.ratio < 3);
})()`;

/** Checks the page as it is, in the light and the dark colour scheme: axe-core finds nothing, every control is at least 44 px, field borders 3:1. */
async function checkPage(page: Page, what: string): Promise<void> {
  for (const colorScheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme });
    if ((await page.evaluate('typeof axe')) === 'undefined') await page.addScriptTag({ content: AXE });
    assert.deepEqual(await page.evaluate(AXE_RUN), [], `axe-core on ${what} (${colorScheme})`);
    assert.deepEqual(await page.evaluate(SMALL_TARGETS), [], `tap targets on ${what} (${colorScheme})`);
    assert.deepEqual(await page.evaluate(FAINT_BORDERS), [], `field borders on ${what} (${colorScheme})`);
  }
}

/** A phone-sized context (CSP bypassed only so that axe-core can be injected). */
function phone(browser: PwBrowser): Promise<BrowserContext> {
  return browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 }, bypassCSP: true });
}

async function signInPage(page: Page, base: string, name: string): Promise<void> {
  await page.goto(`${base}/login`);
  await page.getByLabel('User name').fill(name);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${base}/account/applications`);
}

/** The client application's redirect endpoint: records what arrives there. */
async function startClient(): Promise<{ server: HttpServer; base: string; received: URLSearchParams[] }> {
  const port = await freePort();
  const received: URLSearchParams[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/cb') received.push(url.searchParams);
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>Client</title><h1>Back at the client</h1>');
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { server, base: `http://127.0.0.1:${port}`, received };
}

describe(`the whole flow in a real browser (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  let client: Awaited<ReturnType<typeof startClient>>;
  let browser: PwBrowser;

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t);
    client = await startClient();
    await addUser(t, 'alice', ['--website', 'https://alice.example', '--zoneinfo', 'Europe/Paris', '--email-verified']);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });

  after(async () => {
    await browser?.close();
    await new Promise((r) => client?.server.close(r));
    await s?.server.close();
    await t?.cleanup();
  });

  it('logs in, consents, exchanges the code, reads userinfo, then revokes on the applications page', async () => {
    const redirectUri = `${client.base}/cb`;
    const app = await addApp(t, 'alice', 'confidential', redirectUri, 'Lidarr-like Web');
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 390, height: 844 } });
    const page = await context.newPage();

    const authorizeUrl = `${s.base}/oauth2/authorize?${new URLSearchParams({
      client_id: app.client_id,
      response_type: 'code',
      scope: 'profile email',
      redirect_uri: redirectUri,
      state: 'st-123',
      access_type: 'offline',
    })}`;
    await page.goto(authorizeUrl);
    assert.match(await page.textContent('main') ?? '', /You need to be logged in/);
    await page.getByLabel('User name').fill('alice');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();

    await page.waitForSelector('text=is requesting permission to');
    const consent = (await page.textContent('main')) ?? '';
    assert.match(consent, /Lidarr-like Web/);
    assert.match(consent, /View your public account information/);
    assert.match(consent, /View your email address/);
    assert.match(consent, /when I'm not using the application/);
    await page.getByRole('button', { name: 'Allow access' }).click();
    await page.waitForURL(`${client.base}/cb?**`);
    assert.equal(await page.textContent('h1'), 'Back at the client');

    const got = client.received.at(-1);
    assert.equal(got?.get('state'), 'st-123');
    const code = got?.get('code');
    assert.ok(code !== null && code !== undefined && code.length >= 43);

    const tokenRes = await token(s.base, { grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: app.client_id, client_secret: app.client_secret });
    assert.equal(tokenRes.status, 200, tokenRes.body);
    const tokens = tokenRes.json();
    assert.equal(tokens.token_type, 'Bearer');
    assert.equal(tokens.expires_in, 3600);
    assert.ok(typeof tokens.refresh_token === 'string', 'offline grant carries a refresh token');

    const info = await request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    assert.equal(info.status, 200, info.body);
    assert.deepEqual(info.json(), {
      sub: 'alice',
      profile: `${s.base}/user/alice`,
      metabrainz_user_id: info.json().metabrainz_user_id,
      website: 'https://alice.example',
      zoneinfo: 'Europe/Paris',
      email: 'alice@example.com',
      email_verified: true,
    });
    assert.equal(typeof info.json().metabrainz_user_id, 'number');

    await page.goto(`${s.base}/account/applications`);
    const card = page.locator('.card', { hasText: 'Lidarr-like Web' }).first();
    assert.match((await card.textContent()) ?? '', /offline/);
    // A tap on "Revoke access" only asks; the confirmation's button acts, then redirects (Post/Redirect/Get).
    await card.getByRole('link', { name: 'Revoke access' }).click();
    await page.waitForSelector('text=Are you sure');
    assert.match((await page.textContent('main')) ?? '', /Lidarr-like Web/);
    assert.equal((await request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } })).status, 200, 'asking revoked nothing');
    await page.getByRole('button', { name: 'Revoke access' }).click();
    await page.waitForSelector('text=Access revoked');
    assert.equal(new URL(page.url()).pathname, '/account/applications');
    assert.match((await page.textContent('main')) ?? '', /You have not authorized any applications/);
    await page.reload();
    assert.doesNotMatch((await page.textContent('main')) ?? '', /Access revoked/, 'the notice is said once; the reload repeats nothing');

    const after = await request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    assert.equal(after.status, 401);
    const refreshed = await token(s.base, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: app.client_id, client_secret: app.client_secret });
    assert.equal(refreshed.status, 400);
    assert.equal(refreshed.json().error, 'invalid_grant');
    await context.close();
  });

  it('renders the pages for a phone without horizontal scrolling and with labelled fields', async () => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 } });
    const page = await context.newPage();
    await page.goto(`${s.base}/login`);
    const overflow = Number(await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth'));
    assert.ok(overflow <= 0, `page overflows by ${overflow}px`);
    assert.equal(await page.getByLabel('User name').count(), 1);
    assert.equal(await page.getByLabel('Password').count(), 1);
    const css = await request(`${s.base}/static/sleeve.css`);
    assert.equal(css.status, 200);
    assert.match(String(css.headers['content-type']), /^text\/css/);
    await context.close();
  });

  it('registers an application: the secret is shown once, and a reload neither repeats the registration nor shows it again', async () => {
    const context = await phone(browser);
    const page = await context.newPage();
    await signInPage(page, s.base, 'alice');
    await page.getByRole('link', { name: 'Register an application' }).click();
    await page.getByLabel('Name').fill('Reload Proof');
    await page.getByLabel('Type').selectOption('public');
    await page.getByRole('button', { name: 'Register application' }).click();
    await page.waitForSelector('text=copy the client secret now');
    assert.equal(new URL(page.url()).pathname, '/account/applications', 'redirected after the post');
    const secret = await page.locator('dt:has-text("Client secret") + dd code').textContent();
    assert.match(secret ?? '', /^[A-Za-z0-9_-]{43}$/);
    await page.reload();
    const main = (await page.textContent('main')) ?? '';
    assert.ok(!main.includes(secret ?? '-'), 'not shown again');
    assert.equal(await page.locator('.card h3', { hasText: 'Reload Proof' }).count(), 1, 'registered once');
    await context.close();
  });

  it('every page passes axe-core, with 44 px tap targets and 3:1 field borders, in light and dark', async () => {
    const desktop = await addApp(t, 'alice', 'public', undefined, 'Axe Desktop');
    const anon = await phone(browser);
    const visitor = await anon.newPage();
    for (const path of ['/login', '/', '/no-such-page']) {
      await visitor.goto(`${s.base}${path}`);
      await checkPage(visitor, path);
    }
    await anon.close();

    const context = await phone(browser);
    const page = await context.newPage();
    await signInPage(page, s.base, 'alice');
    const oob = `${s.base}/oauth2/authorize?${new URLSearchParams({ client_id: desktop.client_id, response_type: 'code', scope: 'profile email', redirect_uri: 'urn:ietf:wg:oauth:2.0:oob' })}`;
    await page.goto(oob);
    await checkPage(page, 'consent');
    await page.getByRole('button', { name: 'Allow access' }).click();
    await page.waitForSelector('#code');
    await checkPage(page, 'oob code');
    const code = (await page.textContent('#code')) ?? '';
    const exchanged = await token(s.base, { grant_type: 'authorization_code', code, redirect_uri: 'urn:ietf:wg:oauth:2.0:oob', client_id: desktop.client_id, client_secret: desktop.client_secret });
    assert.equal(exchanged.status, 200, exchanged.body);
    await page.goto(oob);
    await page.getByRole('button', { name: 'No thanks' }).click();
    await page.waitForSelector('text=You did not give');
    await checkPage(page, 'declined');
    await page.goto(`${s.base}/oauth2/authorize?client_id=nope&response_type=code&scope=profile&redirect_uri=x`);
    await checkPage(page, 'authorize error');

    await page.goto(`${s.base}/account/applications`);
    await checkPage(page, 'applications');
    await page.goto(`${s.base}/account/applications/register`);
    await checkPage(page, 'register');
    await page.getByLabel('Name').fill('Axe Web');
    await page.getByLabel('Redirect URL').fill('http://localhost:99999/cb');
    await page.getByRole('button', { name: 'Register application' }).click();
    await page.waitForSelector('text=between 1 and 65535');
    await checkPage(page, 'register with an error');

    const card = page.locator('.card', { hasText: 'Axe Desktop' }).last();
    for (const [link, title] of [
      ['Edit', 'Edit application'],
      ['Reset secret', 'Reset client secret'],
      ['Remove', 'Remove application'],
    ] as const) {
      await page.goto(`${s.base}/account/applications`);
      await card.getByRole('link', { name: link, exact: true }).click();
      await page.waitForSelector(`h1:has-text("${title}")`);
      await checkPage(page, title);
    }
    await page.getByRole('link', { name: 'Cancel' }).click();
    await card.getByRole('link', { name: 'Reset secret', exact: true }).click();
    await page.getByRole('button', { name: 'Reset secret' }).click();
    await page.waitForSelector('text=copy the client secret now');
    await checkPage(page, 'applications, with a new secret shown');
    await page.locator('.card', { hasText: 'Axe Desktop' }).first().getByRole('link', { name: 'Revoke access' }).click();
    await page.waitForSelector('h1:has-text("Revoke access")');
    await checkPage(page, 'revoke access');
    await context.close();
  });
});
