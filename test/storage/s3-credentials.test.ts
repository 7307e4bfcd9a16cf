/*
 * S3 credentials, checked as S3 checks them. s3rver accepts any signature, so here it sits
 * behind a front that verifies AWS Signature Version 4 for one key pair (helpers/sigv4-proxy.ts):
 * the `sleeve` binary, given that pair in the standard AWS variables, must sign every request
 * validly (uploads, reads, listings, deletions); given a wrong secret, it must fail with a clear
 * message and change nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { cliOk, DIALECT, makeTestEnv, runCli, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { startS3, type S3TestServer } from '../helpers/s3.js';
import { startSigV4Proxy, type SigV4Proxy } from '../helpers/sigv4-proxy.js';
import { dbDump, newMbid, writeInput } from '../cover-art/cli-support.js';

const KEY = { accessKeyId: 'AKIASLEEVETEST000001', secretAccessKey: 'sleeve/test+Secret/0123456789abcdefGHIJ' };

describe(`S3 credentials, checked as S3 checks them (${DIALECT})`, () => {
  let s3: S3TestServer;
  let proxy: SigV4Proxy;
  let t: TestEnv;
  const release = newMbid();

  /** The environment of a sleeve command using the checked bucket with this secret. */
  const withSecret = (secret: string): Record<string, string> => ({
    ...t.env,
    SLEEVE_STORAGE_URL: `s3://${s3.bucket}/covers?endpoint=${encodeURIComponent(proxy.endpoint)}&region=${s3.region}&forcePathStyle=true`,
    AWS_ACCESS_KEY_ID: KEY.accessKeyId,
    AWS_SECRET_ACCESS_KEY: secret,
  });

  before(async () => {
    s3 = await startS3();
    proxy = await startSigV4Proxy(s3.endpoint, KEY);
    t = await makeTestEnv();
    await cliOk(withSecret(KEY.secretAccessKey), ['release', 'add', release, '--release-group', newMbid()]);
  });

  after(async () => {
    await t?.cleanup();
    await proxy?.close();
    await s3?.close();
  });

  it('with the right key pair, every request of an upload, an edit and a removal is validly signed', async () => {
    const env = withSecret(KEY.secretAccessKey);
    const file = await writeInput(t, 'front.jpg', await makeJpeg(800, 600));
    const added = await cliOk(env, ['--json', 'art', 'add', release, file, '--type', 'Front', '--comment', 'signed & sealed (100%)']);
    await cliOk(env, ['art', 'edit', release, added.id, '--type', 'Back']);
    const keys = await s3.listKeys('covers/');
    assert.ok(keys.some((k) => k.endsWith(`-${added.id}.jpg`)), keys.join('\n'));
    assert.ok(keys.some((k) => k.endsWith('/index.json')), keys.join('\n'));
    await cliOk(env, ['art', 'remove', release, added.id]);
    assert.deepEqual(
      (await s3.listKeys('covers/')).filter((k) => k.includes(String(added.id))),
      [],
    );
    assert.deepEqual(proxy.refused, []);
    assert.ok(proxy.signed >= 6, `${proxy.signed} signed requests`);
    assert.equal(proxy.anonymous, 0, 'sleeve sent no request unsigned');
  });

  it('with a wrong secret: refused by the store, a message naming the credentials, exit 1, and nothing changed', async () => {
    const keysBefore = await s3.listKeys();
    const rowsBefore = await dbDump(t);
    const refusedBefore = proxy.refused.length;
    const file = await writeInput(t, 'other.jpg', await makeJpeg(320, 240));
    const r = await runCli(withSecret('not-the-secret'), ['art', 'add', release, file]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /access denied \(SignatureDoesNotMatch\); check the credentials \(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/);
    assert.ok(proxy.refused.length > refusedBefore, 'the store refused the signature');
    assert.match(proxy.refused.at(-1) ?? '', /signature does not match/);
    assert.deepEqual(await s3.listKeys(), keysBefore, 'the bucket is as it was');
    const rowsAfter = await dbDump(t);
    // A failed upload burns its id by design (ids are never reused); everything else is as it was.
    const withoutIdCounter = (d: Record<string, string[]>) => ({ ...d, counter: (d.counter ?? []).filter((row) => !row.includes('"cover_art_id"')) });
    assert.deepEqual(withoutIdCounter(rowsAfter), withoutIdCounter(rowsBefore), 'the database is as it was');
  });
});
