/*
 * The edit pages in a real browser (Debian's chromium through playwright-core) under
 * SLEEVE_APPROVAL=review: an approver signs in, finds an editor's pending addition from the
 * release's edit history, approves it, and the gallery shows it approved; an event's pending
 * addition the same way from the event's history; axe-core on the edit page and on the histories.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser as PwBrowser } from 'playwright-core';
import { findAccountByName } from '../../src/auth/index.js';
import { addArt, addImageTo, EVENT_ART } from '../../src/cover-art/index.js';
import { addUser, PASSWORD } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { checkPage, launchChromium } from './browser-support.js';
import { event, release, startSite, type Site } from './page-support.js';

describe(`edit pages in a real browser (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let browser: PwBrowser;

  before(async () => {
    t = await makeTestEnv();
    t.env.SLEEVE_APPROVAL = 'review';
    site = await startSite(t);
    await addUser(t, 'ann', ['--role', 'approver']);
    await addUser(t, 'bob');
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await site?.server.close();
    await t?.cleanup();
  });

  it('an approver approves a pending addition from the release history, and the gallery shows it approved', async () => {
    const { mbid } = await release(site, { title: 'Pending Album' });
    const bob = await findAccountByName(site.server.runtime.auth, 'bob');
    assert.ok(bob !== undefined);
    let edit = 0;
    const image = await addArt(
      site.server.runtime.coverArt,
      { release: mbid, bytes: await makeJpeg(300, 300), types: ['Front'], comment: 'the sleeve' },
      { editor: { id: bob.id, name: 'bob', approver: false }, onEdit: (e) => (edit = e.id) },
    );

    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 }, bypassCSP: true });
    const page = await context.newPage();
    await page.goto(`${site.base}/login?return_to=${encodeURIComponent(`/release/${mbid}/cover-art`)}`);
    await page.getByLabel('User name').fill('ann');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(new RegExp(`/release/${mbid}/cover-art`));
    await page.getByRole('link', { name: '1 pending edit' }).click();
    await page.waitForURL(new RegExp(`/release/${mbid}/edits\\?status=pending`));
    await checkPage(page, 'release history, pending only');
    await page.getByRole('link', { name: 'Show all edits' }).click();
    await page.waitForURL(new RegExp(`/release/${mbid}/edits$`));
    await checkPage(page, 'release history');

    await page.getByRole('link', { name: `#${edit}` }).click();
    await page.waitForURL(new RegExp(`/edit/${edit}$`));
    await checkPage(page, 'pending edit with the forms');
    await page.getByLabel('Note (optional)').first().fill('a fine sleeve');
    await page.getByRole('button', { name: `Approve edit #${edit}` }).click();
    await page.waitForSelector(`text=Approved edit #${edit}.`);
    assert.match((await page.textContent('main')) ?? '', /Approved by\s*ann/);
    await checkPage(page, 'approved edit');

    await page.getByRole('link', { name: 'bob' }).first().click();
    await page.waitForURL(/\/user\/bob\/edits$/);
    await checkPage(page, "an editor's history");

    await page.goto(`${site.base}/release/${mbid}/cover-art`);
    const card = page.locator(`#image-${image.id}`);
    assert.match((await card.textContent()) ?? '', /Approved\s*Yes/);
    assert.equal(await page.getByRole('link', { name: /pending edit/ }).count(), 0, 'nothing pending any more');
    await context.close();
  });

  it("an approver approves a pending event addition from the event's history, and the event's gallery shows it as the poster", async () => {
    const show = await event(site, 'Pending Festival');
    const bob = await findAccountByName(site.server.runtime.auth, 'bob');
    assert.ok(bob !== undefined);
    let edit = 0;
    const image = await addImageTo(site.server.runtime.coverArt, EVENT_ART, show, { bytes: await makeJpeg(300, 400), types: ['Poster'] }, { editor: { id: bob.id, name: 'bob', approver: false }, onEdit: (e) => (edit = e.id) });
    await site.server.refreshCaches();

    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 }, bypassCSP: true });
    const page = await context.newPage();
    await page.goto(`${site.base}/login?return_to=${encodeURIComponent(`/event/${show}/event-art`)}`);
    await page.getByLabel('User name').fill('ann');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(new RegExp(`/event/${show}/event-art`));
    assert.match((await page.locator(`#image-${image.id}`).textContent()) ?? '', /Typed Poster, but not approved yet: it waits for an approver before it can be the poster\./);
    await page.getByRole('link', { name: '1 pending edit' }).click();
    await page.waitForURL(new RegExp(`/event/${show}/edits\\?status=pending`));
    await checkPage(page, "an event's pending edits");
    await page.getByRole('link', { name: `#${edit}` }).click();
    await page.waitForURL(new RegExp(`/edit/${edit}$`));
    await checkPage(page, "an event's pending edit with the forms");
    assert.match((await page.textContent('main')) ?? '', /Add event art[\s\S]*Pending Festival/);
    await page.getByRole('button', { name: `Approve edit #${edit}` }).click();
    await page.waitForSelector(`text=Approved edit #${edit}.`);
    await page.getByRole('link', { name: 'Pending Festival' }).click();
    await page.waitForURL(new RegExp(`/event/${show}/event-art$`));
    assert.match((await page.locator(`#image-${image.id}`).textContent()) ?? '', /The poster: the first image typed Poster/);
    await context.close();
  });
});
