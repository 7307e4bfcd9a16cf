/*
 * Files at rest and secrets in messages, through the real binary: the SQLite database and
 * the files SQLite keeps beside it are private to their owner (0600) after `sleeve migrate`
 * and while `sleeve serve` runs; stored images stay readable (they are public); and no
 * configuration error quotes a password, whichever variable or file carries it.
 */
import assert from 'node:assert/strict';
import { chmod, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliOk, DIALECT, makeTestEnv, runCli, type TestEnv } from './helpers/env.js';
import { makeJpeg } from './helpers/images.js';
import { startServe } from './helpers/serve-process.js';
import { newMbid } from './cover-art/cli-support.js';

async function modeOf(file: string): Promise<number> {
  return (await stat(file)).mode & 0o777;
}

const octal = (mode: number) => mode.toString(8).padStart(4, '0');

describe(`files at rest (${DIALECT})`, () => {
  let t: TestEnv;
  before(async () => {
    t = await makeTestEnv();
  });
  after(async () => t?.cleanup());

  it('the database, its -wal and -shm are 0600 after migrate and while serve runs; images stay world-readable', async (ctx) => {
    await cliOk(t.env, ['migrate']);
    const db = path.join(t.dir, 'sleeve.db');
    if (DIALECT === 'sqlite') assert.equal(octal(await modeOf(db)), '0600', 'sleeve.db after migrate');
    const server = await startServe({ ...t.env, SLEEVE_METRICS_LISTEN: 'off' });
    try {
      const release = newMbid();
      await cliOk(t.env, ['release', 'add', release, '--release-group', newMbid()]);
      await cliOk(t.env, ['art', 'add', release, '-', '--type', 'Front'], { stdin: await makeJpeg(300, 300) });
      if (DIALECT === 'sqlite') {
        // While the server holds the database open, the WAL and its index exist.
        for (const f of ['sleeve.db', 'sleeve.db-wal', 'sleeve.db-shm']) assert.equal(octal(await modeOf(path.join(t.dir, f))), '0600', f);
      } else ctx.diagnostic('PostgreSQL keeps its own files');
      const folder = path.join(t.dir, 'files', `mbid-${release}`);
      const index = path.join(folder, 'index.json');
      // Public content: readable by a web server running as another user.
      assert.equal((await modeOf(index)) & 0o004, 0o004, 'index.json is world-readable');
      assert.equal((await modeOf(folder)) & 0o005, 0o005, 'the release folder can be listed by others');
      assert.equal((await modeOf(path.join(t.dir, 'files'))) & 0o005, 0o005, 'the storage folder can be entered by others');
    } finally {
      await server.stop();
    }
  });

  it('an existing SQLite database readable by others is made 0600 when opened', async () => {
    // A SQLite file of its own on either pass: the mode is SQLite's concern.
    const db = path.join(t.dir, 'old.db');
    const env = { ...t.env, SLEEVE_DATABASE_URL: `sqlite:${db}` };
    await cliOk(env, ['migrate']);
    await chmod(db, 0o644);
    await cliOk(env, ['migrate']);
    assert.equal(octal(await modeOf(db)), '0600');
  });
});

describe('configuration errors never quote a secret', () => {
  const cases: [string, Record<string, string>][] = [
    ['storage URL with user and password', { SLEEVE_STORAGE_URL: 'http://u:PASSWORD1@example.com/bucket' }],
    ['storage URL with a password holding @', { SLEEVE_STORAGE_URL: 'ftp://user:PASS@WORD1@example.com/' }],
    ['s3 URL with credentials in place of the bucket', { SLEEVE_STORAGE_URL: 's3://AKIAEXAMPLE:PASSWORD1@my-bucket?region=eu-west-1' }],
    ['s3 endpoint with credentials', { SLEEVE_STORAGE_URL: 's3://covers?endpoint=http://minio:PASSWORD1@127.0.0.1:9000&forcePathStyle=true' }],
    ['s3 URL with a secret parameter', { SLEEVE_STORAGE_URL: 's3://covers?secretAccessKey=PASSWORD1' }],
    ['database URL with a password and a bad scheme', { SLEEVE_DATABASE_URL: 'mysql://sleeve:PASSWORD1@db.example.com/sleeve' }],
    ['database URL without its scheme', { SLEEVE_DATABASE_URL: 'sleeve:PASSWORD1@db.example.com:5432/sleeve' }],
    ['database URL with a password parameter', { SLEEVE_DATABASE_URL: 'postgres://db.example.com:99999/sleeve?password=PASSWORD1' }],
    ['Redis URL with a password and a path', { SLEEVE_REDIS_URL: 'redis://:PASSWORD1@127.0.0.1:6379/not-a-db' }],
    ['Redis URL with user and password and a bad scheme', { SLEEVE_REDIS_URL: 'http://default:PASSWORD1@127.0.0.1:6379' }],
    ['base URL with credentials', { SLEEVE_BASE_URL: 'http://admin:PASSWORD1@covers.example.com' }],
  ];
  let t: TestEnv;
  before(async () => {
    t = await makeTestEnv();
  });
  after(async () => t?.cleanup());

  for (const [name, extra] of cases) {
    it(name, async () => {
      for (const args of [['migrate'], ['--json', 'art', 'reindex']]) {
        const r = await runCli({ ...t.env, ...extra }, args);
        assert.equal(r.code, 2, r.stderr);
        const variable = Object.keys(extra)[0] as string;
        assert.match(r.stderr, new RegExp(`${variable}=`), 'the variable is named');
        assert.doesNotMatch(r.stderr + r.stdout, /PASSWORD1|WORD1/, `the secret is not quoted:\n${r.stderr}`);
      }
    });
  }

  it('a --config file that is not valid JSON is not quoted', async () => {
    const file = path.join(t.dir, 'bad.json');
    await writeFile(file, '{"SLEEVE_DATABASE_URL": "postgres://u:PASSWORD1@h/db" oops}');
    const r = await runCli(t.env, ['--config', file, 'migrate']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /is not valid JSON/);
    assert.doesNotMatch(r.stderr, /PASSWORD1/);
  });
});
