/*
 * Slow uploads hold nobody else's (audit issue 32): uploads of one user that send their headers
 * and part of their body, then stall, take only that user's share of the upload slots (more are
 * refused at once: 429 with Retry-After), so another user's upload, through the write API or
 * the upload page, succeeds meanwhile; the stalled ones are closed within SLEEVE_REQUEST_TIMEOUT_MS
 * (small here), and then nothing of them stays and their slots are free.
 */
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser, Browser } from '../helpers/auth.js';
import { cliInProcess, DIALECT, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { signIn } from '../auth/support.js';
import { call, multipart, REDIRECT_URI, startSite, toolToken, type Site } from './support.js';

const RELEASE = '33333333-2222-4333-8444-555555555501';
const GROUP = '33333333-2222-4333-8444-5555555555a1';
/** The request timeout of this site: the bound on a whole request, body included. */
const TIMEOUT_MS = 5000;
/** More than the 8 upload slots a process had in all. */
const STALLED = 10;

interface Stalled {
  /** What the server sent, until it closed the connection. */
  received: string;
  closed: boolean;
  done: Promise<void>;
}

describe(`slow uploads (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let mallory: Browser;
  let bob: Browser;
  let malloryToken: string;
  let bobToken: string;
  let jpeg: Buffer;

  const form = (fields: { name: string; value: string }[] = []) => multipart([{ name: 'file', value: jpeg, filename: 'cover.jpg', type: 'image/jpeg' }, { name: 'types', value: 'Front' }, ...fields]);
  const apiUpload = (token: string) => {
    const m = form();
    return call(`${site.web}/api/cover-art/release/${RELEASE}/images`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': m.type }, body: m.body });
  };
  const pageUpload = async (b: Browser) => {
    const page = await b.fetch(`${site.web}/release/${RELEASE}/add-cover-art`);
    const m = multipart([
      { name: 'csrf_token', value: Browser.csrf(page) },
      { name: 'file.0', value: jpeg, filename: 'cover.jpg', type: 'image/jpeg' },
    ]);
    return b.fetch(`${site.web}/release/${RELEASE}/add-cover-art`, { method: 'POST', headers: { 'content-type': m.type }, body: m.body });
  };
  /** The bodies being streamed to the upload folder now. */
  const partFiles = async () => (await readdir(path.join(t.dir, 'uploads')).catch(() => [])).filter((n) => n.endsWith('.part')).length;
  const statusOf = (s: Stalled) => /^HTTP\/1\.1 (\d{3})/.exec(s.received)?.[1];

  /**
   * An upload over its own TLS connection that sends its headers and half its body, then nothing
   * more: to the write API with a token, or to the upload page with a browser's session.
   */
  function stalledUpload(by: string | Browser): Stalled {
    const m = form();
    const url = new URL(site.web);
    const [target, credential] =
      typeof by === 'string'
        ? [`/api/cover-art/release/${RELEASE}/images`, `Authorization: Bearer ${by}`]
        : [`/release/${RELEASE}/add-cover-art`, `Cookie: ${[...by.jar].map(([k, v]) => `${k}=${v}`).join('; ')}`];
    const head = [
      `POST ${target} HTTP/1.1`,
      `Host: ${url.host}`,
      credential,
      `Content-Type: ${m.type}`,
      `Content-Length: ${m.body.length}`,
      '',
      '',
    ].join('\r\n');
    const socket = tls.connect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false });
    const s: Stalled = { received: '', closed: false, done: Promise.resolve() };
    s.done = new Promise((resolve) => {
      socket.on('secureConnect', () => socket.write(Buffer.concat([Buffer.from(head), m.body.subarray(0, m.body.length >> 1)])));
      socket.on('data', (chunk: Buffer) => {
        s.received += chunk.toString('latin1');
      });
      socket.on('error', () => {});
      socket.on('close', () => {
        s.closed = true;
        resolve();
      });
    });
    return s;
  }

  before(async () => {
    t = await makeTestEnv();
    site = await startSite(t, { SLEEVE_REQUEST_TIMEOUT_MS: String(TIMEOUT_MS), SLEEVE_HEADERS_TIMEOUT_MS: String(TIMEOUT_MS) });
    await addUser(t, 'mallory');
    await addUser(t, 'bob');
    const app = await addApp(t, 'bob', 'confidential', REDIRECT_URI, 'Tagger');
    await cliInProcess(t.env, ['release', 'add', RELEASE, '--release-group', GROUP]);
    [mallory, bob] = [await signIn(site.web, 'mallory'), await signIn(site.web, 'bob')];
    [malloryToken, bobToken] = [await toolToken(site, mallory, app, 'cover_art'), await toolToken(site, bob, app, 'cover_art')];
    jpeg = await makeJpeg(300, 300);
  });

  after(async () => {
    await site?.server.close();
    await t?.cleanup();
  });

  it("one user's stalled uploads hold only that user's slots: another's upload succeeds meanwhile, and the stalled ones are closed at the request timeout", async () => {
    const stalled = Array.from({ length: STALLED }, () => stalledUpload(malloryToken));
    // Each one either answered at once, or streaming its body (its part file made).
    const seen = await pollUntil(
      async () => ({ answered: stalled.filter((s) => statusOf(s) !== undefined).length, streaming: await partFiles() }),
      (v) => v.answered + v.streaming >= STALLED,
      15_000,
    );
    assert.equal(seen.value.answered + seen.value.streaming, STALLED, JSON.stringify(seen.value));
    const held = stalled.filter((s) => statusOf(s) === undefined);
    assert.ok(held.length >= 1 && held.length <= 2, `at most 2 uploads of one user at once; held: ${held.length}`);
    for (const s of stalled.filter((x) => statusOf(x) !== undefined)) {
      assert.equal(statusOf(s), '429', s.received.slice(0, 300));
      assert.match(s.received, /\r\nretry-after: \d+\r\n/i);
      assert.match(s.received, /"error":"temporarily_unavailable"/);
    }

    // Meanwhile another user uploads, through the API and the page, while mallory's are still held.
    const byApi = await apiUpload(bobToken);
    assert.equal(byApi.status, 201, byApi.body);
    const byPage = await pageUpload(bob);
    assert.equal(byPage.status, 303, byPage.body.slice(0, 300));
    assert.ok(
      held.every((s) => !s.closed),
      "answered while mallory's stalled uploads were still open",
    );
    // Mallory's own share is taken on the page too.
    const hers = await pageUpload(mallory);
    assert.equal(hers.status, 429, hers.body.slice(0, 300));
    assert.match(String(hers.headers['retry-after']), /^\d+$/);

    // The stalled ones: closed once the request timeout passes, nothing of them left.
    const closed = await pollUntil(
      async () => held.filter((s) => s.closed).length,
      (n) => n === held.length,
      TIMEOUT_MS + 15_000,
    );
    assert.equal(closed.value, held.length, 'every stalled upload was closed');
    // Closed by the request timeout (408) or, at the same bound, as a connection on which nothing moved (closed unanswered).
    for (const s of held) assert.ok(statusOf(s) === undefined ? s.received === '' : statusOf(s) === '408', s.received.slice(0, 300));
    assert.equal((await pollUntil(partFiles, (n) => n === 0)).value, 0, 'no part of a stalled body stays');
    const again = await apiUpload(malloryToken);
    assert.equal(again.status, 201, `her slots are free again: ${again.body}`);
  });

  it('more uploads at once than a process takes, from many users: 503 with Retry-After before the body is read', async () => {
    // Eight users with their two uploads each stalled on the upload page: every slot of the process.
    const names = Array.from({ length: 8 }, (_, i) => `holder${i}`);
    const holders: Browser[] = [];
    // One after another: a sign-in hashes a password, and the request timeout here is short.
    for (const name of names) {
      await addUser(t, name);
      holders.push(await signIn(site.web, name));
    }
    const stalled = holders.flatMap((b) => [stalledUpload(b), stalledUpload(b)]);
    const streaming = await pollUntil(partFiles, (n) => n === stalled.length, 15_000);
    assert.equal(streaming.value, stalled.length, 'every stalled upload streaming');
    assert.ok(stalled.every((s) => statusOf(s) === undefined));

    const refused = await apiUpload(bobToken);
    assert.equal(refused.status, 503, refused.body);
    assert.equal(JSON.parse(refused.body).error, 'temporarily_unavailable');
    assert.equal(refused.headers['retry-after'], '2');
    assert.equal(refused.headers.connection, 'close', 'its body left unread');

    // Once the request timeout has closed them, bob's upload goes through.
    const closed = await pollUntil(async () => stalled.filter((s) => s.closed).length, (n) => n === stalled.length, TIMEOUT_MS + 15_000);
    assert.equal(closed.value, stalled.length);
    const later = (await pollUntil(() => apiUpload(bobToken), (r) => r.status !== 503)).value;
    assert.equal(later.status, 201, later.body);
  });
});
