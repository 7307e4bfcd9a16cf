/*
 * The upload page in a real browser (Debian's chromium through playwright-core): signed out,
 * the page sends the editor to sign in and back; two images chosen with setInputFiles show
 * their previews (the page's script runs under its CSP), are sent with their types and
 * comment, and land in the listing the cover art API serves; axe-core finds no serious
 * violation on the page.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser as PwBrowser } from 'playwright-core';
import { addUser, PASSWORD } from '../helpers/auth.js';
import { cliOk, DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { publicListing, startSite, type Site } from './support.js';

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const RELEASE = '44444444-2222-4333-8444-555555555501';

describe(`uploading through the page in a real browser (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let browser: PwBrowser;

  before(async () => {
    t = await makeTestEnv();
    site = await startSite(t);
    await addUser(t, 'alice');
    await cliOk(t.env, ['release', 'add', RELEASE, '--release-group', '44444444-2222-4333-8444-5555555555a1']);
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox'] });
  });

  after(async () => {
    await browser?.close();
    await site?.server.close();
    await t?.cleanup();
  });

  it('sign in, choose two images, see their previews, upload, find them in the listing', async () => {
    // The page's own CSP in force (not bypassed): its script must run under it.
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 390, height: 800 } });
    const page = await context.newPage();
    const refused: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) refused.push(m.text());
    });
    const uploadUrl = `${site.web}/release/${RELEASE}/add-cover-art`;
    await page.goto(uploadUrl);
    assert.match(page.url(), /\/login\?return_to=/);
    await page.getByLabel('User name').fill('alice');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(uploadUrl);

    await page.locator('#file-0').setInputFiles({ name: 'front.jpg', mimeType: 'image/jpeg', buffer: await makeJpeg(300, 300) });
    await page.locator('#file-1').setInputFiles({ name: 'back.png', mimeType: 'image/png', buffer: await makePng(240, 240) });
    await page.locator('#preview-0 img[alt="Preview of front.jpg"]').waitFor();
    await page.locator('#preview-1 img[alt="Preview of back.png"]').waitFor();
    await page.locator('input[name="types.0"][value="Front"]').check();
    await page.locator('input[name="types.1"][value="Back"]').check();
    await page.getByLabel('Comment').nth(1).fill('from the browser');
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.waitForURL(`${site.web}/release/${RELEASE}/cover-art`);

    const listing = await publicListing(site, RELEASE);
    assert.deepEqual(listing?.images.map((i) => [i.types, i.comment]), [
      [['Front'], ''],
      [['Back'], 'from the browser'],
    ]);
    assert.deepEqual(refused, [], 'nothing refused by the CSP');
    await context.close();
  });

  it('axe-core finds no serious or critical violation on the upload page', async () => {
    // CSP bypassed here only so that axe-core can be injected.
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 }, bypassCSP: true });
    const page = await context.newPage();
    await page.goto(`${site.web}/login`);
    await page.getByLabel('User name').fill('alice');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/account\/applications/);
    await page.goto(`${site.web}/release/${RELEASE}/add-cover-art`);
    await page.addScriptTag({ content: AXE });
    const violations = await page.evaluate(`axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'] } })
      .then((r) => r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id + ': ' + v.nodes.map((n) => n.target.join(' ')).join(', ')))`);
    assert.deepEqual(violations, []);
    await context.close();
  });
});
