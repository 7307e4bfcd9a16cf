/*
 * Sign-out in a real browser (chromium): RP-Initiated Logout's confirmation page and its
 * redirect back to the client, the hint that skips the page, and the header's "Sign out"
 * button on the pages of a signed-in user. The protocol's details: test/auth/logout.test.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server as HttpServer } from 'node:http';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser as PwBrowser, type Page } from 'playwright-core';
import { addApp, addUser, PASSWORD, startAuthServer, token, type AuthServer } from '../helpers/auth.js';
import { DIALECT, freePort, makeTestEnv, type TestEnv } from '../helpers/env.js';

const CHROMIUM = process.env.SLEEVE_TEST_CHROMIUM ?? '/usr/bin/chromium';
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const AXE_RUN = `axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] } })
  .then((r) => r.violations.map((v) => v.id + ': ' + v.nodes.map((n) => n.target.join(' ')).join(', ')))`;

/** The client: records what arrives at /cb (its redirect URI, registered, and so its logout URI too). */
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

describe(`sign-out in a real browser (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  let rp: Awaited<ReturnType<typeof startClient>>;
  let browser: PwBrowser;

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t);
    rp = await startClient();
    await addUser(t, 'alice');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });

  after(async () => {
    await browser?.close();
    await new Promise((r) => rp?.server.close(r));
    await s?.server.close();
    await t?.cleanup();
  });

  async function signInAt(page: Page, url: string): Promise<void> {
    await page.goto(url);
    await page.getByLabel('User name').fill('alice');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  /** Whether the browser is signed in: the applications page, or the sign-in form it is sent to. */
  async function signedIn(page: Page): Promise<boolean> {
    await page.goto(`${s.base}/account/applications`);
    return new URL(page.url()).pathname === '/account/applications';
  }

  it("confirms on a page (phone-sized, accessible) without a hint, then goes back to the client with state; a matching hint skips the page; the header's button signs out", async () => {
    const redirectUri = `${rp.base}/cb`;
    const app = await addApp(t, 'alice', 'confidential', redirectUri, 'Logout Client');
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 }, bypassCSP: true });
    const page = await context.newPage();

    const authorizeUrl = `${s.base}/oauth2/authorize?${new URLSearchParams({ client_id: app.client_id, response_type: 'code', scope: 'openid', redirect_uri: redirectUri })}`;
    await signInAt(page, authorizeUrl);
    await page.getByRole('button', { name: 'Allow access' }).click();
    await page.waitForURL(`${redirectUri}?**`);
    const code = rp.received.at(-1)?.get('code') as string;
    const tokens = (await token(s.base, { grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: app.client_id, client_secret: app.client_secret })).json();
    assert.equal(typeof tokens.id_token, 'string');

    // No hint: the page asks, and the header carries its own "Sign out" button too.
    await page.goto(`${s.base}/oauth2/logout?${new URLSearchParams({ client_id: app.client_id, post_logout_redirect_uri: redirectUri, state: 'bye-1' })}`);
    assert.match((await page.textContent('main')) ?? '', /Logout Client asks to sign you out of sleeve/);
    assert.equal(await page.locator('header').getByRole('button', { name: 'Sign out' }).count(), 1);
    await page.addScriptTag({ content: AXE });
    assert.deepEqual(await page.evaluate(AXE_RUN), [], 'axe-core on the confirmation page');
    assert.ok((await page.evaluate<number>('document.documentElement.scrollWidth')) <= 360, 'no horizontal scrolling at 360 px');
    await page.locator('main').getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${redirectUri}?**`);
    assert.equal(rp.received.at(-1)?.get('state'), 'bye-1');
    const cookies = await context.cookies(s.base);
    assert.equal(cookies.find((c) => c.name === '__Host-sleeve-session'), undefined, 'the session cookie is gone');
    assert.equal(await signedIn(page), false);

    // A hint of the signed-in user: no page at all.
    await signInAt(page, `${s.base}/login`);
    await page.waitForURL(`${s.base}/account/applications`);
    await page.goto(`${s.base}/oauth2/logout?${new URLSearchParams({ id_token_hint: tokens.id_token, post_logout_redirect_uri: redirectUri, state: 'bye-2' })}`);
    await page.waitForURL(`${redirectUri}?**`);
    assert.equal(rp.received.at(-1)?.get('state'), 'bye-2');
    assert.equal(await signedIn(page), false);

    // The header's button on a signed-in page.
    await signInAt(page, `${s.base}/login`);
    await page.waitForURL(`${s.base}/account/applications`);
    await page.locator('header').getByRole('button', { name: 'Sign out' }).click();
    await page.waitForLoadState();
    assert.equal(await signedIn(page), false);
    await context.close();
  });
});
