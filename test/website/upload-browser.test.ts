/*
 * The upload page in a real browser (Debian's chromium through playwright-core). With script,
 * under the page's own CSP: several files from the picker and one dropped on the page, each a
 * card with its preview, size and dimensions, its own types and comment; one edit note; a
 * progress bar each; a failed upload (the connection cut) retried; then the gallery says what
 * was added, and the edit note is on the edits. Without script: one image per submission, the
 * same notice. On a 360×740 phone and a 1280×800 screen: nothing wider than the viewport,
 * touch targets of 44 px at least, axe-core clean. An event's page (add-event-art) the same way.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Browser as PwBrowser, BrowserContext, Page } from 'playwright-core';
import { addUser, PASSWORD } from '../helpers/auth.js';
import { cliInProcess, DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeGif, makeJpeg, makePng } from '../helpers/images.js';
import { checkPage, launchChromium } from './browser-support.js';
import { publicEventListing, publicListing, startSite, type Site } from './support.js';

const RELEASE = '44444444-2222-4333-8444-555555555501';
const NO_SCRIPT = '44444444-2222-4333-8444-555555555502';
const LAYOUT = '44444444-2222-4333-8444-555555555503';
const EVENT = '44444444-2222-4333-8444-5555555555e1';

/** Dispatches a drop of one file on the page's heading (far from the file field), as a drag from the desktop does. */
function dropScript(name: string, type: string, bytes: Buffer): string {
  return `(() => {
    const bytes = Uint8Array.from(atob(${JSON.stringify(bytes.toString('base64'))}), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], ${JSON.stringify(name)}, { type: ${JSON.stringify(type)} }));
    const target = document.querySelector('h1');
    for (const kind of ['dragenter', 'dragover', 'drop']) target.dispatchEvent(new DragEvent(kind, { dataTransfer: dt, bubbles: true, cancelable: true }));
  })()`;
}

/** Elements in <main> that stick out of the viewport, and interactive ones smaller than 44 × 44 px. */
const LAYOUT_PROBLEMS = `(() => {
  const width = document.documentElement.clientWidth;
  const visible = (el) => { const r = el.getBoundingClientRect(); const s = getComputedStyle(el); return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.clip !== 'rect(0px, 0px, 0px, 0px)'; };
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  const wide = [...document.querySelectorAll('main *')].filter(visible).filter((el) => { const r = el.getBoundingClientRect(); return r.left < -0.5 || r.right > width + 0.5; }).map(name);
  const targets = 'main button, main summary, main a.action, main input[type=file], main input[type=text], main textarea, main label.check';
  const small = [...document.querySelectorAll(targets)].filter(visible).filter((el) => { const r = el.getBoundingClientRect(); return r.width < 44 || r.height < 44; }).map((el) => name(el) + ' ' + Math.round(el.getBoundingClientRect().width) + 'x' + Math.round(el.getBoundingClientRect().height));
  return { wide, small };
})()`;

describe(`uploading through the page in a real browser (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let browser: PwBrowser;
  let files: { front: Buffer; back: Buffer; dropped: Buffer };

  const signedIn = async (options: Parameters<PwBrowser['newContext']>[0]): Promise<{ context: BrowserContext; page: Page }> => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true, ...options });
    const page = await context.newPage();
    await page.goto(`${site.web}/login`);
    await page.getByLabel('User name').fill('alice');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/account\/applications/);
    return { context, page };
  };

  before(async () => {
    t = await makeTestEnv();
    site = await startSite(t);
    await addUser(t, 'alice');
    for (const release of [RELEASE, NO_SCRIPT, LAYOUT]) await cliInProcess(t.env, ['release', 'add', release, '--release-group', '44444444-2222-4333-8444-5555555555a1']);
    await cliInProcess(t.env, ['event', 'add', EVENT, '--name', 'Upload Festival']);
    files = { front: await makeJpeg(300, 300), back: await makePng(240, 200), dropped: await makeGif(120, 90) };
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await site?.server.close();
    await t?.cleanup();
  });

  it('signed out: to the sign-in page and back', async () => {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    const uploadUrl = `${site.web}/release/${RELEASE}/add-cover-art`;
    await page.goto(uploadUrl);
    assert.match(page.url(), /\/login\?return_to=/);
    await page.getByLabel('User name').fill('alice');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(uploadUrl);
    await context.close();
  });

  it('with script: two files picked and one dropped, each with its preview, size, dimensions, types and comment; a cut upload retried; the gallery says so', async () => {
    // The page's own CSP in force (not bypassed): its script must run under it.
    const { context, page } = await signedIn({ viewport: { width: 360, height: 740 } });
    const refused: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) refused.push(m.text());
    });
    await page.goto(`${site.web}/release/${RELEASE}/add-cover-art`);
    await page.getByLabel('Images', { exact: true }).setInputFiles([
      { name: 'front.jpg', mimeType: 'image/jpeg', buffer: files.front },
      { name: 'back.png', mimeType: 'image/png', buffer: files.back },
    ]);
    await page.evaluate(dropScript('dropped.gif', 'image/gif', files.dropped));
    const cards = page.locator('#upload-list li.upload-card');
    await page.waitForFunction("document.querySelectorAll('#upload-list img.preview').length === 3 && [...document.querySelectorAll('#upload-list img.preview')].every((i) => i.complete && i.naturalWidth > 0)");
    const facts = async () => (await cards.locator('.upload-size').allTextContents()).join(' | ');
    await page.waitForFunction("[...document.querySelectorAll('#upload-list .upload-size')].every((p) => p.textContent.includes('px'))");
    assert.match(await facts(), /^\d+ kB · 300 × 300 px \| \d+ (kB|bytes) · 240 × 200 px \| \d+ (kB|bytes) · 120 × 90 px$/);
    assert.equal(await cards.locator('img[alt="Preview of back.png"]').count(), 1);
    assert.equal(await page.locator('#row-0').isVisible(), false, 'the one-file row is for pages without script');

    // Types from each card's disclosure; the summary says what is chosen.
    const back = cards.nth(1);
    await cards.nth(0).locator('summary').click();
    await cards.nth(0).getByLabel('Front', { exact: true }).check();
    await back.locator('summary').click();
    await back.getByLabel('Back', { exact: true }).check();
    await back.getByLabel('Spine', { exact: true }).check();
    assert.equal(await back.locator('summary').textContent(), 'Types: Back, Spine');
    await back.getByLabel('Comment').fill('the back');
    await cards.nth(2).getByLabel('Comment').fill('dropped');
    await page.getByLabel('Edit note').fill('Scanned from my own copy.');

    // The second upload's connection is cut: it fails alone, and Retry sends it again.
    let posts = 0;
    await page.route(`${site.web}/release/${RELEASE}/add-cover-art`, async (route) => {
      if (route.request().method() === 'POST' && ++posts === 2) return route.abort('connectionreset');
      return route.continue();
    });
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.locator('#upload-message', { hasText: 'not added' }).waitFor();
    assert.ok(await back.getByRole('button', { name: 'Retry back.png' }).isVisible());
    assert.match((await back.locator('.upload-state').textContent()) ?? '', /connection was lost/);
    assert.match((await page.locator('#upload-message').textContent()) ?? '', /1 image was not added/);
    assert.equal(await cards.nth(0).locator('progress').getAttribute('value'), '100', 'a progress bar each, full once sent');
    assert.match((await cards.nth(2).locator('.upload-state').textContent()) ?? '', /^Added image \d+\.$/);
    const before = (await publicListing(site, RELEASE))?.images.length;
    assert.equal(before, 2, 'the others are in');

    await back.getByRole('button', { name: 'Retry back.png' }).click();
    await page.waitForURL(`${site.web}/release/${RELEASE}/cover-art`);
    const listing = (await publicListing(site, RELEASE)) as unknown as { images: { id: string; types: string[]; comment: string; edit: number }[] };
    assert.deepEqual(
      listing.images.map((i) => [i.types, i.comment]),
      [
        [['Front'], ''],
        [[], 'dropped'],
        [['Back', 'Spine'], 'the back'],
      ],
    );
    const notice = await page.locator('p.notice[role=status]').first().textContent();
    assert.equal(notice, `Added 3 images: ${listing.images.map((i) => i.id).join(', ')}.`);
    await page.goto(`${site.web}/edit/${listing.images[2]?.edit}`);
    assert.equal(await page.locator('dd.edit-note').textContent(), 'Scanned from my own copy.');
    assert.deepEqual(refused, [], 'nothing refused by the CSP');
    await context.close();
  });

  it('without script: one image with its types and comment, then the gallery says it was added', async () => {
    const { context, page } = await signedIn({ viewport: { width: 360, height: 740 }, javaScriptEnabled: false });
    await page.goto(`${site.web}/release/${NO_SCRIPT}/add-cover-art`);
    await page.getByLabel('Image', { exact: true }).setInputFiles({ name: 'front.jpg', mimeType: 'image/jpeg', buffer: files.front });
    await page.locator('#row-0 summary').click();
    await page.locator('#row-0').getByLabel('Front', { exact: true }).check();
    await page.locator('#row-0').getByLabel('Comment').fill('no script');
    await page.getByLabel('Edit note').fill('From the booklet.');
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.waitForURL(`${site.web}/release/${NO_SCRIPT}/cover-art`);
    const listing = (await publicListing(site, NO_SCRIPT)) as unknown as { images: { id: string; types: string[]; comment: string }[] };
    assert.deepEqual(listing.images.map((i) => [i.types, i.comment]), [[['Front'], 'no script']]);
    assert.equal(await page.locator('p.notice[role=status]').first().textContent(), `Added image ${listing.images[0]?.id}.`);
    await context.close();
  });

  for (const viewport of [
    { width: 360, height: 740 },
    { width: 1280, height: 800 },
  ]) {
    it(`at ${viewport.width}×${viewport.height}, with and without script: nothing wider than the screen, 44 px targets, axe-core clean`, async () => {
      for (const withScript of [true, false]) {
        const what = `${viewport.width}×${viewport.height}, ${withScript ? 'with' : 'without'} script`;
        // CSP bypassed here only so that axe-core can be injected; "without script" is the page's script not loaded (axe-core needs the browser's).
        const { context, page } = await signedIn({ viewport, bypassCSP: true });
        if (!withScript) await page.route('**/static/add-cover-art.js*', (route) => route.abort());
        await page.goto(`${site.web}/release/${LAYOUT}/add-cover-art`);
        if (withScript) {
          await page.getByLabel('Images', { exact: true }).setInputFiles([
            { name: 'a-rather-long-file-name-from-a-scanner-0001-front-cover.jpg', mimeType: 'image/jpeg', buffer: files.front },
            { name: 'back.png', mimeType: 'image/png', buffer: files.back },
          ]);
          await page.locator('#upload-list li.upload-card').nth(1).waitFor();
          await page.locator('#upload-list li.upload-card summary').first().click();
        } else {
          await page.locator('#row-0 summary').click();
        }
        assert.deepEqual(await page.evaluate(LAYOUT_PROBLEMS), { wide: [], small: [] }, what);
        await checkPage(page, `the upload page (${what})`);
        await context.close();
      }
    });
  }

  it("an event's upload page: two files with script and one without, typed Poster; the gallery says so; at 360 px nothing wider, 44 px targets, axe-core clean", async () => {
    const uploadUrl = `${site.web}/event/${EVENT}/add-event-art`;
    const gallery = `${site.web}/event/${EVENT}/event-art`;
    // With script, under the page's own CSP.
    const scripted = await signedIn({ viewport: { width: 360, height: 740 } });
    await scripted.page.goto(uploadUrl);
    assert.equal(await scripted.page.title(), 'Add event art · sleeve');
    await scripted.page.getByLabel('Images', { exact: true }).setInputFiles([
      { name: 'poster.jpg', mimeType: 'image/jpeg', buffer: files.front },
      { name: 'crowd.png', mimeType: 'image/png', buffer: files.back },
    ]);
    const cards = scripted.page.locator('#upload-list li.upload-card');
    await cards.nth(1).waitFor();
    await cards.nth(0).locator('summary').click();
    await cards.nth(0).getByLabel('Poster', { exact: true }).check();
    await cards.nth(1).getByLabel('Comment').fill('the crowd');
    await scripted.page.getByRole('button', { name: 'Upload' }).click();
    await scripted.page.waitForURL(gallery);
    const two = (await publicEventListing(site, EVENT))?.images ?? [];
    assert.deepEqual(two.map((i) => [i.types, i.comment, i.front]), [[['Poster'], '', true], [[], 'the crowd', false]]);
    assert.equal(await scripted.page.locator('p.notice[role=status]').first().textContent(), `Added 2 images: ${two.map((i) => i.id).join(', ')}.`);
    await scripted.context.close();

    // Without script: one image per submission.
    const plain = await signedIn({ viewport: { width: 360, height: 740 }, javaScriptEnabled: false });
    await plain.page.goto(uploadUrl);
    await plain.page.getByLabel('Image', { exact: true }).setInputFiles({ name: 'flyer.gif', mimeType: 'image/gif', buffer: files.dropped });
    await plain.page.locator('#row-0 summary').click();
    await plain.page.locator('#row-0').getByLabel('Poster', { exact: true }).check();
    await plain.page.getByLabel('Edit note').fill('The flyer, scanned.');
    await plain.page.getByRole('button', { name: 'Upload' }).click();
    await plain.page.waitForURL(gallery);
    const three = (await publicEventListing(site, EVENT))?.images ?? [];
    assert.deepEqual(three.map((i) => [i.types, i.front]), [[['Poster'], true], [[], false], [['Poster'], false]]);
    assert.equal(await plain.page.locator('p.notice[role=status]').first().textContent(), `Added image ${three[2]?.id}.`);
    await plain.page.goto(`${site.web}/edit/${three[2]?.edit}`);
    assert.equal(await plain.page.locator('dd.edit-note').textContent(), 'The flyer, scanned.');
    await plain.context.close();

    // CSP bypassed only so that axe-core can be injected.
    const { context, page } = await signedIn({ viewport: { width: 360, height: 740 }, bypassCSP: true });
    await page.goto(uploadUrl);
    await page.getByLabel('Images', { exact: true }).setInputFiles([{ name: 'a-rather-long-file-name-of-a-festival-poster-0001.jpg', mimeType: 'image/jpeg', buffer: files.front }]);
    await page.locator('#upload-list li.upload-card summary').first().click();
    assert.deepEqual(await page.evaluate(LAYOUT_PROBLEMS), { wide: [], small: [] });
    await checkPage(page, "an event's upload page");
    await context.close();
  });
});
