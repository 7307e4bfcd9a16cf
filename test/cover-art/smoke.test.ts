import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliInProcess, DIALECT, makeTestEnv, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { dimensions, makeJpeg } from '../helpers/images.js';

const RELEASE = '11111111-1111-4111-8111-111111111111';
const GROUP = '22222222-2222-4222-8222-222222222222';

describe(`end to end: CLI ingest, then the API and the file server (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  let frontId: string;
  let original: Buffer;

  before(async () => {
    t = await makeTestEnv();
    s = await startServer(t);
    original = await makeJpeg(1600, 1200);
    const file = path.join(t.dir, 'cover.jpg');
    await writeFile(file, original);
    await cliInProcess(t.env, ['release', 'add', RELEASE, '--release-group', GROUP, '--title', 'Smoke', '--date', '2001-02-03']);
    const entry = await cliInProcess(t.env, ['--json', 'art', 'add', RELEASE, file, '--type', 'Front', '--approved', '--edit', '7']);
    frontId = entry.id;
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('redirects front to the original and serves it byte for byte', async () => {
    const res = await fetch(`${s.base}/release/${RELEASE}/front`, { redirect: 'manual' });
    assert.equal(res.status, 307);
    const location = res.headers.get('location');
    assert.equal(location, `${s.base}/download/mbid-${RELEASE}/mbid-${RELEASE}-${frontId}.jpg`);
    assert.equal(await res.text(), `See: ${location}\n`);
    const file = await fetch(location as string);
    assert.equal(file.status, 200);
    assert.equal(file.headers.get('content-type'), 'image/jpeg');
    assert.deepEqual(Buffer.from(await file.arrayBuffer()), original);
  });

  it('serves a 500 px JPEG thumbnail behind front-500', async () => {
    const res = await fetch(`${s.base}/release/${RELEASE}/front-500`);
    assert.equal(res.status, 200);
    const dims = await dimensions(Buffer.from(await res.arrayBuffer()));
    assert.deepEqual(dims, { format: 'jpeg', width: 500, height: 375 });
  });
});
