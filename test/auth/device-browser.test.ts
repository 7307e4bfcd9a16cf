/*
 * The device flow end to end with real parts: openid-client 6 (default discovery over sleeve's
 * HTTPS listener, trusting its self-signed certificate) asks for device codes and polls the
 * token endpoint with its own interval, while a real browser (Debian's chromium) signs in on
 * the device page, enters the code and approves; axe-core checks the device pages.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import * as client from 'openid-client';
import { chromium, type Browser as PwBrowser, type Page } from 'playwright-core';
import { addApp, addUser, PASSWORD, startAuthServer, type AuthServer } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { fetchTrustingDataDir, type Client } from './support.js';

const CHROMIUM = process.env.SLEEVE_TEST_CHROMIUM ?? '/usr/bin/chromium';
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const AXE_RUN = `axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] } })
  .then((r) => r.violations.map((v) => v.id + ' (' + v.impact + '): ' + v.nodes.map((n) => n.target.join(' ')).join(', ')))`;

/** axe-core on the page as it is, light and dark: no violations. */
async function checkPage(page: Page, what: string): Promise<void> {
  for (const colorScheme of ['light', 'dark'] as const) {
    await page.emulateMedia({ colorScheme });
    if ((await page.evaluate('typeof axe')) === 'undefined') await page.addScriptTag({ content: AXE });
    assert.deepEqual(await page.evaluate(AXE_RUN), [], `axe-core on ${what} (${colorScheme})`);
  }
}

describe(`the device flow with openid-client and a real browser (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  let browser: PwBrowser;
  let tv: Client;
  let customFetch: client.CustomFetch;

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t);
    customFetch = fetchTrustingDataDir(t.env.SLEEVE_DATA_DIR);
    await addUser(t, 'alice');
    tv = await addApp(t, 'alice', 'public', undefined, 'Headless Tagger');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });

  after(async () => {
    await browser?.close();
    await s?.server.close();
    await t?.cleanup();
  });

  it('a public client (client_id only) gets codes, the user approves in the browser while it polls, and it gets tokens with an id_token', async () => {
    // A public client: no secret at all (token_endpoint_auth_method "none").
    const config = await client.discovery(new URL(s.base), tv.client_id, undefined, client.None(), { [client.customFetch]: customFetch });
    assert.equal(config.serverMetadata().device_authorization_endpoint, `${s.base}/oauth2/device_authorization`);
    const codes = await client.initiateDeviceAuthorization(config, { scope: 'openid profile' });
    assert.match(codes.user_code, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    assert.equal(codes.interval, 5);
    const polling = client.pollDeviceAuthorizationGrant(config, codes);

    // A phone (the CSP bypassed only so that axe-core can be injected).
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 }, bypassCSP: true });
    const page = await context.newPage();
    await page.goto(codes.verification_uri);
    // Signed out: the sign-in form, which comes back to the device page.
    await page.waitForURL(/\/login\?return_to=/);
    await checkPage(page, 'sign-in before the device page');
    await page.getByLabel('User name').fill('alice');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForSelector('h1:has-text("Connect a device")');
    await checkPage(page, 'device code entry');

    // A wrong code first: a clear message, the form again.
    await page.getByLabel('Code').fill('bcdf-ghjk');
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.waitForSelector('text=There is no such code');
    await checkPage(page, 'device code entry with an error');

    // The code as a person might type it: lower case, without the dash.
    await page.getByLabel('Code').fill(codes.user_code.replace('-', '').toLowerCase());
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.waitForSelector('text=is requesting permission to');
    const consent = (await page.textContent('main')) ?? '';
    assert.match(consent, /Headless Tagger/);
    assert.match(consent, /Know who you are/);
    assert.ok(consent.includes(codes.user_code), 'the consent page shows the code to compare');
    await checkPage(page, 'device consent');
    await page.getByRole('button', { name: 'Allow access' }).click();
    await page.waitForSelector('h1:has-text("Device connected")');
    assert.match((await page.textContent('main')) ?? '', /You gave Headless Tagger access/);
    await checkPage(page, 'device connected');
    await page.reload();
    assert.match((await page.textContent('h1')) ?? '', /Device connected/, 'a reload repeats nothing (Post/Redirect/Get)');

    const tokens = await polling;
    assert.equal(tokens.token_type.toLowerCase(), 'bearer');
    assert.equal(typeof tokens.refresh_token, 'string');
    const claims = tokens.claims();
    assert.equal(claims?.sub, 'alice');
    assert.equal(claims?.aud, tv.client_id);
    const info = await client.fetchUserInfo(config, tokens.access_token, 'alice');
    assert.equal(info.preferred_username, 'alice');
    await context.close();
  });

  it('"No thanks" in the browser ends the polling with access_denied', async () => {
    const config = await client.discovery(new URL(s.base), tv.client_id, undefined, client.None(), { [client.customFetch]: customFetch });
    const codes = await client.initiateDeviceAuthorization(config, { scope: 'profile' });
    const polling = client.pollDeviceAuthorizationGrant(config, codes);
    // Its rejection can come while the page is still being checked (a slow machine): asserted below, not unhandled.
    polling.catch(() => {});
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 }, bypassCSP: true });
    const page = await context.newPage();
    await page.goto(codes.verification_uri_complete as string);
    await page.getByLabel('User name').fill('alice');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForSelector('text=is requesting permission to');
    // Reached from a link (verification_uri_complete): the page warns against device code phishing, first.
    const main = page.locator('main');
    const text = (await main.innerText()).replace(/\s+/g, ' ');
    const warning = 'Only continue if you started signing in on a device that is in front of you right now.';
    assert.ok(text.includes(warning), text);
    assert.ok(text.indexOf(warning) < text.indexOf('is requesting permission to'), 'the warning comes before the request');
    assert.match(text, /If someone sent you this link or the code, or asked you to enter it, choose "No thanks"/);
    assert.match(text, /The application Headless Tagger is requesting permission to/);
    assert.match(text, /the access lasts until you revoke it/);
    assert.ok(text.includes(codes.user_code), 'the code to compare');
    assert.equal(await page.getByRole('link', { name: 'applications page' }).getAttribute('href'), '/account/applications');
    await checkPage(page, 'device consent reached from verification_uri_complete');
    await page.getByRole('button', { name: 'No thanks' }).click();
    await page.waitForSelector('h1:has-text("Device not connected")');
    await checkPage(page, 'device not connected');
    await assert.rejects(polling, (err: unknown) => err instanceof client.ResponseBodyError && err.error === 'access_denied');
    await context.close();
  });
});
