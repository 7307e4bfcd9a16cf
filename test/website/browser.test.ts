/*
 * The cover art pages in a real browser (Debian's chromium through playwright-core): browse from
 * the home page to a gallery, edit an image's types, reorder by keyboard and by dragging, remove
 * with confirmation, choose the group's cover; an event's pages the same way; axe-core on every
 * page, no horizontal scroll on a phone, and the images and the script load under the pages'
 * real CSP.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser as PwBrowser, Page } from 'playwright-core';
import { addUser, PASSWORD } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { checkPage, launchChromium } from './browser-support.js';
import { art, event, release, startSite, type Site } from './page-support.js';

/** The image ids of the gallery on the page, in order. */
function galleryOrder(page: Page): Promise<string[]> {
  return page.locator('li.art').evaluateAll((els) => els.map((e) => e.id.replace('image-', '')));
}

describe(`cover art pages in a real browser (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let browser: PwBrowser;
  let group: string;
  let main: string;
  let other: string;
  let ids: string[];

  before(async () => {
    t = await makeTestEnv();
    site = await startSite(t);
    await addUser(t, 'alice');
    ({ mbid: main, group } = await release(site, { title: 'Browser Album', date: '1995' }));
    ({ mbid: other } = await release(site, { group, title: 'Reissue', date: '2005' }));
    await art(site, other, { types: ['Front'] });
    ids = [
      await art(site, main, { types: ['Front'], comment: 'cover', width: 900, height: 900 }),
      await art(site, main, { types: ['Back'], width: 600, height: 400 }),
      await art(site, main, { comment: 'booklet page', width: 400, height: 600 }),
    ];
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await site?.server.close();
    await t?.cleanup();
  });

  it('loads the images and the script under the real CSP, with nothing refused', async () => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 } });
    const page = await context.newPage();
    const refused: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) refused.push(m.text());
    });
    await page.goto(`${site.base}/release/${main}/cover-art`);
    // A function, not a string: a string predicate is eval'd in the page, which its CSP forbids.
    await page.waitForFunction(() => Array.from((globalThis as any).document.images as { complete: boolean }[]).every((i) => i.complete));
    const widths = await page.locator('li.art img').evaluateAll((imgs) => imgs.map((i) => (i as unknown as { naturalWidth: number }).naturalWidth));
    assert.equal(widths.length, 3);
    assert.ok(widths.every((w) => w > 0), `every image loaded: ${widths.join(', ')}`);
    assert.deepEqual(refused, []);
    await context.close();
  });

  it('browses as a visitor on a phone: home, search, gallery, group', async () => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 }, bypassCSP: true });
    const page = await context.newPage();
    await page.goto(`${site.base}/`);
    await checkPage(page, 'home');
    await page.getByLabel('Release, release group or event MBID').fill('not an mbid');
    await page.getByRole('button', { name: 'Find art' }).click();
    await page.waitForSelector('text=is not an MBID');
    await checkPage(page, 'home with a search error');
    await page.locator('ul.recent a').first().click();
    await page.waitForURL(new RegExp(`/release/${main}/cover-art`));
    await checkPage(page, 'release gallery');
    assert.deepEqual(await galleryOrder(page), ids);
    await page.goto(`${site.base}/release-group/${group}/cover-art`);
    assert.match((await page.textContent('main')) ?? '', /earliest release date/);
    await checkPage(page, 'release group page');
    await page.goto(`${site.base}/release/00000000-0000-4000-8000-000000000000/cover-art`);
    await checkPage(page, 'unknown release');
    await context.close();
  });

  it('curates as an editor: edit types, reorder by keyboard and by dragging, remove with confirmation, choose the group cover', async () => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 }, bypassCSP: true });
    const page = await context.newPage();
    await page.goto(`${site.base}/release/${main}/cover-art`);
    await page.getByRole('link', { name: 'Sign in' }).first().click();
    await page.getByLabel('User name').fill('alice');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/account\/applications/);

    // Edit the third image's types.
    await page.goto(`${site.base}/release/${main}/cover-art`);
    await page.getByRole('link', { name: 'Edit image 3' }).click();
    await checkPage(page, 'edit form');
    await page.getByLabel('Booklet').check();
    await page.getByLabel('Comment').fill('booklet, page 1');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.waitForSelector('text=Saved the types and comment of image 3.');
    await checkPage(page, 'gallery after an edit');
    assert.match((await page.locator(`#image-${ids[2]}`).textContent()) ?? '', /Booklet[\s\S]*booklet, page 1/);

    // Reorder by keyboard: move the first image down twice, then save.
    await page.goto(`${site.base}/release/${main}/reorder-cover-art`);
    await checkPage(page, 'reorder form');
    await page.getByRole('button', { name: 'Move down image 1' }).focus();
    await page.keyboard.press('Enter');
    await page.waitForURL(/move=down/);
    assert.equal(await page.evaluate('document.activeElement.textContent'), 'Move down image 2', 'focus follows the image');
    await page.keyboard.press('Enter');
    await page.waitForURL(/move=down/);
    await page.getByRole('button', { name: 'Save order' }).focus();
    await page.keyboard.press('Enter');
    await page.waitForSelector('text=Saved the new order.');
    assert.deepEqual(await galleryOrder(page), [ids[1], ids[2], ids[0]]);

    // By dragging: the last image onto the first.
    await page.goto(`${site.base}/release/${main}/reorder-cover-art`);
    await page.locator(`li[data-id="${ids[0]}"]`).dragTo(page.locator(`li[data-id="${ids[1]}"]`), { targetPosition: { x: 10, y: 2 } });
    assert.equal(await page.locator('form[method=post] input[name=order]').inputValue(), [ids[0], ids[1], ids[2]].join(','), 'the drop set the order');
    await page.getByRole('button', { name: 'Save order' }).click();
    await page.waitForSelector('text=Saved the new order.');
    assert.deepEqual(await galleryOrder(page), [ids[0], ids[1], ids[2]]);

    // Remove the back image, after its confirmation.
    await page.getByRole('link', { name: 'Remove image 2' }).click();
    await checkPage(page, 'remove confirmation');
    await page.getByRole('button', { name: 'Remove image 2' }).click();
    await page.waitForSelector('text=Removed image 2.');
    assert.deepEqual(await galleryOrder(page), [ids[0], ids[2]]);

    // The group's cover: the reissue instead of the earliest release.
    await page.goto(`${site.base}/release-group/${group}/cover-art`);
    await page.getByRole('link', { name: "Choose the group's cover" }).click();
    await checkPage(page, 'set cover form');
    await page.getByLabel('Reissue').check();
    await page.getByRole('button', { name: "Use this release's cover" }).click();
    await page.waitForSelector('text=an editor chose it for the group');
    await checkPage(page, 'group page after the choice');
    assert.match((await page.textContent('figcaption')) ?? '', /Reissue/);
    await context.close();
  });

  it("an event's pages: found by the search, the poster explained; edit types, reorder, remove after confirmation, the event's history; axe-core clean on a phone", async () => {
    const show = await event(site, 'Browser Festival');
    const posters = [await art(site, show, { event: true, types: ['Poster'], comment: 'the poster' }), await art(site, show, { event: true, comment: 'stage' }), await art(site, show, { event: true, png: true })];
    const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 360, height: 740 }, bypassCSP: true });
    const page = await context.newPage();
    // The home page's recent additions: the event's images first (the newest), each leading to its gallery.
    await page.goto(`${site.base}/`);
    await checkPage(page, 'home with event art among the recent additions');
    assert.deepEqual(await page.locator('ul.recent li').evaluateAll((els) => els.slice(0, 3).map((e) => e.textContent)), Array(3).fill('Browser Festival (event)'));
    await page.locator('ul.recent a').first().click();
    await page.waitForURL(new RegExp(`/event/${show}/event-art#image-${posters[2]}$`));
    assert.deepEqual(await galleryOrder(page), posters);
    await page.goto(`${site.base}/`);
    await page.getByLabel('Release, release group or event MBID').fill(`https://musicbrainz.org/event/${show}`);
    await page.getByRole('button', { name: 'Find art' }).click();
    await page.waitForURL(new RegExp(`/event/${show}/event-art$`));
    await checkPage(page, 'event gallery');
    assert.equal(await page.locator('h1').textContent(), 'Event art: Browser Festival');
    assert.deepEqual(await galleryOrder(page), posters);
    assert.match((await page.locator(`#image-${posters[0]}`).textContent()) ?? '', /The poster: the first image typed Poster in this order\./);

    await page.goto(`${site.base}/login?return_to=${encodeURIComponent(`/event/${show}/event-art`)}`);
    await page.getByLabel('User name').fill('alice');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(new RegExp(`/event/${show}/event-art$`));
    assert.ok(await page.getByRole('link', { name: 'Add event art' }).isVisible());

    // The second image typed Poster too: the first stays the poster, and the card says why.
    await page.getByRole('link', { name: 'Edit image 2' }).click();
    await checkPage(page, 'event image edit form');
    assert.deepEqual(await page.locator('fieldset.types input[type=checkbox]').evaluateAll((els) => els.map((e) => (e as unknown as { value: string }).value)), ['Poster'], "the event's art types");
    await page.getByLabel('Poster').check();
    await page.getByLabel('Comment').fill('the stage');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.waitForSelector('text=Saved the types and comment of image 2.');
    assert.match((await page.locator(`#image-${posters[1]}`).textContent()) ?? '', /Typed Poster, but image 1 comes first, so that one is the poster\./);

    // Move it up, then save: it is the poster now.
    await page.goto(`${site.base}/event/${show}/reorder-event-art`);
    await checkPage(page, 'event reorder form');
    assert.match((await page.textContent('main')) ?? '', /The first image typed Poster becomes the event's poster\./);
    await page.getByRole('button', { name: 'Move up image 2' }).click();
    await page.waitForURL(/move=up/);
    await page.getByRole('button', { name: 'Save order' }).click();
    await page.waitForSelector('text=Saved the new order.');
    assert.deepEqual(await galleryOrder(page), [posters[1], posters[0], posters[2]]);
    assert.match((await page.locator(`#image-${posters[1]}`).textContent()) ?? '', /The poster:/);

    // Remove the third, after its confirmation.
    await page.getByRole('link', { name: 'Remove image 3' }).click();
    await checkPage(page, 'event remove confirmation');
    assert.match((await page.textContent('main')) ?? '', /from this event\?/);
    await page.getByRole('button', { name: 'Remove image 3' }).click();
    await page.waitForSelector('text=Removed image 3.');
    assert.deepEqual(await galleryOrder(page), [posters[1], posters[0]]);

    await page.getByRole('link', { name: 'Edit history' }).click();
    await page.waitForURL(new RegExp(`/event/${show}/edits$`));
    await checkPage(page, "the event's edit history");
    const items = await page.locator('ol.edits li').allTextContents();
    assert.deepEqual(items.slice(0, 3).map((i) => /(Remove|Reorder|Edit) event art · alice/.exec(i)?.[1]), ['Remove', 'Reorder', 'Edit']);
    await context.close();
  });
});
