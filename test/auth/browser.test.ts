import assert from 'node:assert/strict';
import { createServer, type Server as HttpServer } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser as PwBrowser } from 'playwright-core';
import { addApp, addUser, PASSWORD, request, startAuthServer, token, type AuthServer } from '../helpers/auth.js';
import { DIALECT, freePort, makeTestEnv, type TestEnv } from '../helpers/env.js';

const CHROMIUM = process.env.SLEEVE_TEST_CHROMIUM ?? '/usr/bin/chromium';

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
    await card.getByRole('button', { name: 'Revoke access' }).click();
    await page.waitForSelector('text=Access revoked.');
    assert.match((await page.textContent('main')) ?? '', /You have not authorized any applications/);

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
});
