/*
 * SLEEVE_STORAGE_URL=s3://…: what the URL means (bucket, prefix, endpoint, region, path
 * style, the public URL redirects point at) and every way it can be wrong, named in the
 * one configuration error, through loadConfig and through the binary.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError, loadConfig, type Config } from '../../src/config/load.js';
import { makeTestEnv, runCli, type TestEnv } from '../helpers/env.js';

function load(env: Record<string, string>): Readonly<Config> {
  return loadConfig(env, '/srv/sleeve');
}

/** The problems of a configuration that must fail. */
function problemsOf(env: Record<string, string>): string[] {
  try {
    load(env);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.problems;
  }
  assert.fail(`configuration ${JSON.stringify(env)} was accepted`);
}

describe('SLEEVE_STORAGE_URL=s3://…', () => {
  it('reads bucket, endpoint, region and path style; redirects point at the bucket path-style', () => {
    const c = load({ SLEEVE_STORAGE_URL: 's3://covers?endpoint=http://127.0.0.1:9000&region=eu-west-1&forcePathStyle=true' });
    assert.deepEqual(c.storage, {
      kind: 's3',
      bucket: 'covers',
      prefix: '',
      endpoint: 'http://127.0.0.1:9000',
      region: 'eu-west-1',
      forcePathStyle: true,
      publicUrl: 'http://127.0.0.1:9000/covers',
    });
    assert.equal(c.imageBaseUrl, 'http://127.0.0.1:9000/covers');
  });

  it('takes a key prefix after the bucket (a trailing slash does not matter), and puts it in the public URL', () => {
    for (const url of ['s3://covers/caa/v1?endpoint=http://minio:9000&forcePathStyle=true', 's3://covers/caa/v1/?endpoint=http://minio:9000&forcePathStyle=true']) {
      const c = load({ SLEEVE_STORAGE_URL: url });
      assert.equal(c.storage.kind === 's3' && c.storage.prefix, 'caa/v1');
      assert.equal(c.imageBaseUrl, 'http://minio:9000/covers/caa/v1');
    }
  });

  it('without an endpoint means AWS: region us-east-1 unless given, virtual-hosted public URL', () => {
    const c = load({ SLEEVE_STORAGE_URL: 's3://my-covers' });
    assert.equal(c.storage.kind === 's3' && c.storage.endpoint, undefined);
    assert.equal(c.storage.kind === 's3' && c.storage.region, 'us-east-1');
    assert.equal(c.imageBaseUrl, 'https://my-covers.s3.us-east-1.amazonaws.com');
    assert.equal(load({ SLEEVE_STORAGE_URL: 's3://my-covers/p?region=eu-central-1' }).imageBaseUrl, 'https://my-covers.s3.eu-central-1.amazonaws.com/p');
    assert.equal(load({ SLEEVE_STORAGE_URL: 's3://my-covers?region=eu-central-1&forcePathStyle=true' }).imageBaseUrl, 'https://s3.eu-central-1.amazonaws.com/my-covers');
    // A dotted name would not match the wildcard certificate of a virtual host.
    assert.equal(load({ SLEEVE_STORAGE_URL: 's3://covers.example.org' }).imageBaseUrl, 'https://s3.us-east-1.amazonaws.com/covers.example.org');
  });

  it('virtual-hosted style on another endpoint puts the bucket in the host name', () => {
    assert.equal(load({ SLEEVE_STORAGE_URL: 's3://covers?endpoint=https://s3.example.net:8443' }).imageBaseUrl, 'https://covers.s3.example.net:8443');
  });

  it('publicUrl= names the bucket public URL (the prefix is added to it); SLEEVE_IMAGE_BASE_URL (a CDN) wins over both', () => {
    const url = 's3://covers/caa?endpoint=https://abc.r2.cloudflarestorage.com&region=auto&publicUrl=https://pub-123.r2.dev/';
    assert.equal(load({ SLEEVE_STORAGE_URL: url }).imageBaseUrl, 'https://pub-123.r2.dev/caa');
    assert.equal(load({ SLEEVE_STORAGE_URL: url, SLEEVE_IMAGE_BASE_URL: 'https://cdn.example.com/art/' }).imageBaseUrl, 'https://cdn.example.com/art');
    // With file storage the default stays the built-in file server.
    assert.equal(load({}).imageBaseUrl, 'http://localhost:8080/download');
  });

  it('file: storage is unchanged; SLEEVE_STORAGE_READS picks how it reads', () => {
    assert.deepEqual(load({ SLEEVE_STORAGE_URL: 'file:./files' }).storage, { kind: 'file', root: path.resolve('/srv/sleeve', 'files'), reads: 'auto' });
    assert.deepEqual(load({ SLEEVE_STORAGE_URL: 'file:./files', SLEEVE_STORAGE_READS: 'POOL' }).storage, { kind: 'file', root: path.resolve('/srv/sleeve', 'files'), reads: 'pool' });
    assert.throws(() => load({ SLEEVE_STORAGE_READS: 'sometimes' }), /SLEEVE_STORAGE_READS="sometimes": must be auto, inline or pool/);
  });

  const bad: [string, RegExp][] = [
    ['s3://', /bucket name "" is missing/],
    ['s3://?endpoint=http://h:1', /bucket name "" is missing/],
    ['s3://ab', /bucket name "ab" must be 3 to 63 characters long/],
    [`s3://${'a'.repeat(64)}`, /must be 3 to 63 characters long/],
    ['s3://My_Bucket', /bucket name "My_Bucket" may hold only lower-case letters, digits, '\.' and '-'/],
    ['s3://-covers', /must start and end with a letter or digit/],
    ['s3://cov..ers', /must not have '\.\.'/],
    ['s3://192.168.1.10', /must not look like an IP address/],
    ['s3://covers/../x', /key prefix "\.\.\/x" must be \/-separated names/],
    ['s3://covers//x', /key prefix "\/x" must be/],
    ['s3://covers/a b', /key prefix "a b" must be/],
    ['s3://covers?bucket=x', /unknown parameter "bucket" \(known: endpoint, region, forcePathStyle, publicUrl\)/],
    ['s3://covers?region=eu-west-1&region=us-east-1', /parameter region is given more than once/],
    ['s3://covers?endpoint=ftp://h', /endpoint "ftp:\/\/h" must be an http:\/\/ or https:\/\/ URL/],
    ['s3://covers?endpoint=localhost:9000', /endpoint "localhost:9000" must be an http:\/\/ or https:\/\/ URL/],
    ['s3://covers?endpoint=http://h:9000/path', /with a host and no path/],
    ['s3://covers?endpoint=http://key:secret@h:9000', /no path, query or credentials/],
    ['s3://covers?region=EU%20West', /region "EU West" must look like us-east-1/],
    ['s3://covers?forcePathStyle=yes', /forcePathStyle must be true or false/],
    ['s3://covers?publicUrl=cdn.example.com', /publicUrl "cdn\.example\.com" must be an absolute http or https URL/],
    ['s3://covers#x', /a fragment \(#\) has no meaning here/],
  ];
  for (const [url, why] of bad) {
    it(`refuses ${url} with a reason`, () => {
      const problems = problemsOf({ SLEEVE_STORAGE_URL: url });
      assert.equal(problems.length, 1, problems.join('\n'));
      // Quoted without credentials.
      assert.ok(problems[0]?.startsWith(`SLEEVE_STORAGE_URL=${JSON.stringify(url.replace('key:secret@', '***@'))}: `), problems[0]);
      assert.match(problems[0] as string, why);
    });
  }

  it('names everything wrong with one URL on its one line', () => {
    const [line, ...more] = problemsOf({ SLEEVE_STORAGE_URL: 's3://X?endpoint=nope&colour=blue' });
    assert.deepEqual(more, []);
    assert.match(line as string, /bucket name "X" must be 3 to 63/);
    assert.match(line as string, /unknown parameter "colour"/);
    assert.match(line as string, /endpoint "nope"/);
  });

  it('another scheme is refused with the two that work', () => {
    assert.match(problemsOf({ SLEEVE_STORAGE_URL: 'gs://covers' })[0] as string, /must start with file: or s3:\/\//);
  });
});

describe('a bad s3:// URL through the binary', () => {
  let t: TestEnv;

  before(async () => {
    t = await makeTestEnv();
  });
  after(async () => t?.cleanup());

  it('is named with the other bad variables, exit 2, before anything is created or the SDK is asked', async () => {
    const dataDir = path.join(t.dir, 'never-created');
    const r = await runCli({ ...t.env, SLEEVE_DATA_DIR: dataDir, SLEEVE_STORAGE_URL: 's3://Bad_Bucket?endpoint=ftp://x', SLEEVE_LOG_LEVEL: 'loud' }, ['--json', 'migrate']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /^sleeve: invalid configuration:\n/);
    assert.match(r.stderr, /\n {2}- SLEEVE_STORAGE_URL="s3:\/\/Bad_Bucket\?endpoint=ftp:\/\/x": bucket name "Bad_Bucket" .*; endpoint "ftp:\/\/x" must be/);
    assert.match(r.stderr, /\n {2}- SLEEVE_LOG_LEVEL="loud"/);
    assert.equal(JSON.parse(r.stdout).error.code, 'CONFIG');
    assert.equal(existsSync(dataDir), false);
  });
});
