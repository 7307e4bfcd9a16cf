/*
 * The CLI and the servers cannot disagree on public URLs: `sleeve serve` publishes its
 * SLEEVE_BASE_URL and SLEEVE_MUSICBRAINZ_URL in the database, every index.json is written
 * with them whichever process writes it, a command given other values says so, and a
 * server started with new values rewrites the listings written with the old ones.
 */
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliInProcess, DIALECT, makeTestEnv, runCli, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';

const R = 'b1e50000-0000-4000-8000-000000000001';
const G = 'b1e50000-0000-4000-8000-0000000000aa';

describe(`commands write the public URLs the servers publish (${DIALECT})`, () => {
  let t: TestEnv;
  let file: string;
  let server: ServeProcess | undefined;

  /** Every URL in the release's index.json, as the file server serves it (or from the store before any server ran). */
  async function listingUrls(): Promise<string[]> {
    const text =
      server === undefined
        ? await readFile(path.join(t.dir, 'files', `mbid-${R}`, 'index.json'), 'utf8')
        : await (await fetch(`${server.base}/download/mbid-${R}/index.json`)).text();
    const listing = JSON.parse(text) as { release: string; images: { image: string; thumbnails: Record<string, string> }[] };
    return [listing.release, ...listing.images.flatMap((i) => [i.image, ...Object.values(i.thumbnails)])];
  }

  before(async () => {
    t = await makeTestEnv();
    file = path.join(t.dir, 'c.jpg');
    await writeFile(file, await makeJpeg(64, 64));
  });

  after(async () => {
    await server?.stop();
    await t?.cleanup();
  });

  it('before any server ran, a command writes its own URLs; the first server rewrites them with its own', async () => {
    await cliInProcess(t.env, ['release', 'add', R, '--release-group', G]);
    await cliInProcess(t.env, ['art', 'add', R, file, '--type', 'Front']);
    const urls = await listingUrls();
    assert.equal(urls[0], `https://musicbrainz.org/release/${R}`);
    assert.ok(urls.slice(1).every((u) => u.startsWith(`http://localhost:8080/release/${R}/`)), urls.join(' '));

    server = await startServe({ ...t.env, SLEEVE_MUSICBRAINZ_URL: 'https://mb.example.org' });
    const now = await listingUrls();
    assert.equal(now[0], `https://mb.example.org/release/${R}`);
    assert.ok(now.slice(1).every((u) => u.startsWith(`${server?.base}/release/${R}/`)), now.join(' '));
  });

  it('a command run without the server’s SLEEVE_BASE_URL writes the server’s URLs, silently', async () => {
    const r = await runCli(t.env, ['--json', 'art', 'add', R, file, '--type', 'Back']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    assert.ok((JSON.parse(r.stdout) as { image: string }).image.startsWith(`${server?.base}/release/${R}/`));
    const urls = await listingUrls();
    assert.equal(urls.length, 1 + 2 * 6);
    assert.ok(urls.slice(1).every((u) => u.startsWith(`${server?.base}/release/${R}/`)), urls.join(' '));
  });

  it('a command given other URLs says so and still writes the server’s', async () => {
    const r = await runCli({ ...t.env, SLEEVE_BASE_URL: 'http://elsewhere.example:1' }, ['art', 'reindex', R]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /^sleeve: warning: SLEEVE_BASE_URL\/SLEEVE_MUSICBRAINZ_URL here \(http:\/\/elsewhere\.example:1, https:\/\/musicbrainz\.org\) differ from those the servers/);
    assert.ok(r.stderr.includes(`(${server?.base}, https://mb.example.org)`), r.stderr);
    assert.ok(r.stderr.includes('restart sleeve serve with the new values'), r.stderr);
    const urls = await listingUrls();
    assert.ok(urls.slice(1).every((u) => u.startsWith(`${server?.base}/release/${R}/`)), urls.join(' '));
  });

  it('a server started with a new SLEEVE_BASE_URL rewrites every listing before it answers', async () => {
    const old = server?.base as string;
    await server?.stop();
    server = await startServe({ ...t.env, SLEEVE_MUSICBRAINZ_URL: 'https://mb.example.org' });
    assert.notEqual(server.base, old);
    const urls = await listingUrls();
    assert.ok(urls.slice(1).every((u) => u.startsWith(`${server?.base}/release/${R}/`)), urls.join(' '));
    const group = JSON.parse(await (await fetch(`${server.base}/release-group/${G}/`)).text()) as { images: { image: string }[] };
    assert.ok(group.images.every((i) => i.image.startsWith(`${server?.base}/release/${R}/`)));
    assert.match(server.stdout(), /public URLs changed/);
  });
});
