/*
 * Configuration, through the real binary: every bad variable named in one error before
 * anything listens or is created, and `--config FILE` under the environment.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../src/config/load.js';
import { cliOk, DIALECT, freePort, makeTestEnv, runCli, type TestEnv } from './helpers/env.js';
import { makePng } from './helpers/images.js';
import { newMbid, readIndex, runCliWithin, spawnCli, writeInput } from './cover-art/cli-support.js';

/** The variables (or config-file problems) listed, one per `  - ` line, in the error on stderr. */
function problems(stderr: string): string[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('  - '))
    .map((l) => /^ {2}- (--config \S+: .*|SLEEVE_[A-Z0-9_]+)/.exec(l)?.[1] ?? l);
}

describe(`configuration (${DIALECT})`, () => {
  let t: TestEnv;

  before(async () => {
    t = await makeTestEnv();
  });
  after(async () => t?.cleanup());

  it('sleeve serve with several bad variables exits 2 before listening, naming every one of them', async () => {
    const port = await freePort();
    const dataDir = path.join(t.dir, 'never-created');
    const env = {
      ...t.env,
      SLEEVE_DATA_DIR: dataDir,
      SLEEVE_AUTH_LISTEN: `127.0.0.1:${port}`,
      SLEEVE_COVERART_LISTEN: 'nope',
      SLEEVE_METRICS_LISTEN: 'everywhere',
      SLEEVE_RATE_LIMIT: 'abc',
      SLEEVE_BASE_URL: 'ftp://x',
      SLEEVE_FOO: '1',
    };
    const r = await runCliWithin(env, ['serve'], 20_000);
    assert.equal(r.timedOut, false, 'serve exited instead of running');
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /^sleeve: invalid configuration:\n/);
    assert.deepEqual(problems(r.stderr).sort(), ['SLEEVE_BASE_URL', 'SLEEVE_COVERART_LISTEN', 'SLEEVE_FOO', 'SLEEVE_METRICS_LISTEN', 'SLEEVE_RATE_LIMIT']);
    // Each problem says what is wrong with the value.
    assert.match(r.stderr, /SLEEVE_COVERART_LISTEN="nope": must be host:port/);
    assert.match(r.stderr, /SLEEVE_RATE_LIMIT="abc": must look like 300\/10s/);
    assert.match(r.stderr, /SLEEVE_METRICS_LISTEN="everywhere": must be host:port/);
    assert.match(r.stderr, /SLEEVE_BASE_URL="ftp:\/\/x": must be an absolute http or https URL/);
    assert.match(r.stderr, /SLEEVE_FOO: unknown variable/);
    assert.doesNotMatch(r.stderr, /sleeve is running/);
    assert.equal(existsSync(dataDir), false, 'nothing was created before the configuration was checked');
    // The auth port was never taken.
    await assert.rejects(fetch(`https://127.0.0.1:${port}/`), 'nothing listens on the auth port');
  });

  it('every command checks the configuration; --json gives a CONFIG error object', async () => {
    const env = {
      ...t.env,
      SLEEVE_DATABASE_URL: 'mysql://db/x',
      SLEEVE_STORAGE_URL: 'ftp://files',
      SLEEVE_LOG_LEVEL: 'loud',
      SLEEVE_UPLOAD_MAX_BYTES: '-1',
      SLEEVE_UPLOAD_MAX_PIXELS: 'lots',
      SLEEVE_TRUST_PROXY: '10.0.0.0/33',
      SLEEVE_AUTH_URL: 'http://insecure.example',
      SLEEVE_TLS_CERT: '/tmp/cert.pem',
      SLEEVE_DEMO: 'maybe',
      SLEEVE_FAST_LANE: 'fast',
      SLEEVE_AUTH_LISTEN: '127.0.0.1:99999',
    };
    const r = await runCli(env, ['--json', 'migrate']);
    assert.equal(r.code, 2, r.stderr);
    assert.deepEqual(problems(r.stderr).sort(), [
      'SLEEVE_AUTH_LISTEN',
      'SLEEVE_AUTH_URL',
      'SLEEVE_DATABASE_URL',
      'SLEEVE_DEMO',
      'SLEEVE_FAST_LANE',
      'SLEEVE_LOG_LEVEL',
      'SLEEVE_STORAGE_URL',
      'SLEEVE_TLS_KEY',
      'SLEEVE_TRUST_PROXY',
      'SLEEVE_UPLOAD_MAX_BYTES',
      'SLEEVE_UPLOAD_MAX_PIXELS',
    ]);
    assert.equal(JSON.parse(r.stdout).error.code, 'CONFIG');
  });

  it('SLEEVE_FAST_LANE: on by default, off as SLEEVE_DEMO is', () => {
    const base = { SLEEVE_DATA_DIR: t.dir };
    assert.equal(loadConfig(base).fastLane, true);
    for (const off of ['off', 'OFF', 'false', '0', 'no']) assert.equal(loadConfig({ ...base, SLEEVE_FAST_LANE: off }).fastLane, false, off);
    for (const on of ['on', 'true', '1', 'yes']) assert.equal(loadConfig({ ...base, SLEEVE_FAST_LANE: on }).fastLane, true, on);
  });

  it('SLEEVE_METRICS_LISTEN: loopback port 9464 by default, off in any case, never the address of another listener', () => {
    const base = { SLEEVE_DATA_DIR: t.dir };
    assert.deepEqual(loadConfig(base).metricsListen, { host: '127.0.0.1', port: 9464 });
    assert.equal(loadConfig({ ...base, SLEEVE_METRICS_LISTEN: 'off' }).metricsListen, undefined);
    assert.equal(loadConfig({ ...base, SLEEVE_METRICS_LISTEN: 'OFF' }).metricsListen, undefined);
    assert.deepEqual(loadConfig({ ...base, SLEEVE_METRICS_LISTEN: '[::1]:9100' }).metricsListen, { host: '::1', port: 9100 });
    // Port 0 (any free port) never collides.
    assert.deepEqual(loadConfig({ ...base, SLEEVE_METRICS_LISTEN: '127.0.0.1:0', SLEEVE_COVERART_LISTEN: '127.0.0.1:0' }).metricsListen, { host: '127.0.0.1', port: 0 });
    for (const [other, value] of [
      ['SLEEVE_COVERART_LISTEN', '127.0.0.1:8080'],
      ['SLEEVE_AUTH_LISTEN', '127.0.0.1:8443'],
    ] as const) {
      assert.throws(
        () => loadConfig({ ...base, SLEEVE_METRICS_LISTEN: value }),
        (err: unknown) => err instanceof ConfigError && err.problems.length === 1 && err.problems[0] === `SLEEVE_METRICS_LISTEN="${value}": is the same address as ${other}`,
      );
    }
  });

  it('the variables for several processes are checked: the Redis URL (named without its password), poll and shutdown delays', async () => {
    const bad = async (vars: Record<string, string>) => runCli({ ...t.env, ...vars }, ['migrate']);
    for (const url of ['http://127.0.0.1:6379', 'redis://', 'redis://h:6379/x', 'redis://h/0?tls=1', 'not a url']) {
      const r = await bad({ SLEEVE_REDIS_URL: url });
      assert.equal(r.code, 2, url);
      assert.deepEqual(problems(r.stderr), ['SLEEVE_REDIS_URL'], url);
      assert.match(r.stderr, /SLEEVE_REDIS_URL=".*": must be redis:\/\/\[\[USER\]:PASSWORD@\]HOST\[:PORT\]\[\/DB\] or rediss:\/\/… \(TLS\)/, url);
    }
    const secret = await bad({ SLEEVE_REDIS_URL: 'redis://app:s3cret@cache.internal:6379/db' });
    // The whole user info goes: a user name may be a token too (https://TOKEN@host).
    assert.match(secret.stderr, /SLEEVE_REDIS_URL="redis:\/\/\*\*\*@cache\.internal:6379\/db": .*database number/);
    assert.doesNotMatch(secret.stderr, /s3cret/);

    const r = await bad({ SLEEVE_CHANGE_POLL_REDIS_MS: '5', SLEEVE_SHUTDOWN_DELAY_MS: '-1' });
    assert.equal(r.code, 2);
    assert.deepEqual(problems(r.stderr).sort(), ['SLEEVE_CHANGE_POLL_REDIS_MS', 'SLEEVE_SHUTDOWN_DELAY_MS']);
    assert.match(r.stderr, /SLEEVE_CHANGE_POLL_REDIS_MS="5": must be a whole number from 10 to 600000/);
    assert.match(r.stderr, /SLEEVE_SHUTDOWN_DELAY_MS="-1": must be a whole number from 0 to 300000/);

    // Good values pass (nothing needs to listen at the Redis address for migrate).
    for (const url of ['redis://127.0.0.1:1', 'rediss://:pw@cache.example:6380/2', 'redis://[::1]:6379']) {
      const ok = await runCli({ ...t.env, SLEEVE_REDIS_URL: url, SLEEVE_CHANGE_POLL_REDIS_MS: '2000', SLEEVE_SHUTDOWN_DELAY_MS: '5000' }, ['migrate']);
      assert.equal(ok.code, 0, `${url}: ${ok.stderr}`);
    }
  });

  it('SLEEVE_PASSWORD_HASH_COST: the log2 of scrypt N from 10 to 20', async () => {
    for (const cost of ['9', '21', '15.5', 'high']) {
      const r = await runCli({ ...t.env, SLEEVE_PASSWORD_HASH_COST: cost }, ['migrate']);
      assert.equal(r.code, 2, cost);
      assert.deepEqual(problems(r.stderr), ['SLEEVE_PASSWORD_HASH_COST'], cost);
      assert.match(r.stderr, /SLEEVE_PASSWORD_HASH_COST=".*": must be a whole number from 10 to 20/, cost);
    }
    assert.equal(loadConfig({ SLEEVE_DATA_DIR: t.dir }).passwordHashing.cost, 15);
  });

  it('--config FILE supplies variables, and the environment wins over it', async () => {
    const file = path.join(t.dir, 'sleeve.json');
    await writeFile(
      file,
      JSON.stringify({
        SLEEVE_BASE_URL: 'http://from-file.example',
        SLEEVE_MUSICBRAINZ_URL: 'https://mb.from-file.example',
        SLEEVE_UPLOAD_MAX_PIXELS: 5000,
        SLEEVE_DEMO: false,
      }),
    );
    const release = newMbid();
    await cliOk(t.env, ['--config', file, 'release', 'add', release, '--release-group', newMbid()]);
    const image = await writeInput(t, '100x100.png', await makePng(100, 100));

    // The file's pixel limit applies...
    const refused = await runCli(t.env, ['art', 'add', release, image, `--config=${file}`]);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /exceeds the limit of 5000 pixels \(SLEEVE_UPLOAD_MAX_PIXELS\)/);
    // ...until the environment says otherwise; the file's URLs are used unless the environment gives one.
    const env = { ...t.env, SLEEVE_UPLOAD_MAX_PIXELS: '10000', SLEEVE_BASE_URL: 'http://from-env.example' };
    const entry = await cliOk(env, ['art', 'add', release, image, '--config', file, '--json']);
    assert.equal(entry.image, `http://from-env.example/release/${release}/${entry.id}.png`);
    const index = await readIndex(t, release);
    assert.equal(index.release, `https://mb.from-file.example/release/${release}`);
    assert.equal(index.images[0].image, entry.image);
  });

  it('sleeve serve --config FILE listens where the environment says over the file, and stops on SIGTERM', async () => {
    const [filePort, envPort] = [await freePort(), await freePort()];
    const file = path.join(t.dir, 'serve.json');
    await writeFile(file, JSON.stringify({ SLEEVE_COVERART_LISTEN: `127.0.0.1:${filePort}`, SLEEVE_RATE_LIMIT: '1000/1s' }));
    const { child, done } = spawnCli({ ...t.env, SLEEVE_COVERART_LISTEN: `127.0.0.1:${envPort}` }, ['--config', file, 'serve', '--only', 'coverart']);
    try {
      const deadline = Date.now() + 20_000;
      let res: Response | undefined;
      while (res === undefined && Date.now() < deadline) {
        res = await fetch(`http://127.0.0.1:${envPort}/robots.txt`).catch(() => undefined);
        if (res === undefined) await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(res !== undefined, 'serve listens on the port the environment gives');
      assert.equal(res.status, 200);
      assert.equal(await res.text(), 'User-agent: *\nAllow: /');
      await assert.rejects(fetch(`http://127.0.0.1:${filePort}/robots.txt`), 'nothing on the port of the file');
    } finally {
      child.kill('SIGTERM');
    }
    const r = await done;
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /cover art: {2}http:\/\/127\.0\.0\.1:\d+/);
  });

  it('a bad --config FILE is named: missing, not JSON, unknown keys and values of the wrong kind', async () => {
    const missing = await runCli(t.env, ['--config', path.join(t.dir, 'absent.json'), 'migrate']);
    assert.equal(missing.code, 2);
    assert.equal(missing.stderr, `sleeve: --config ${path.join(t.dir, 'absent.json')}: no such file\n`, 'one line');

    const notJson = path.join(t.dir, 'bad.json');
    await writeFile(notJson, '{ SLEEVE_DEMO: off');
    const r1 = await runCli(t.env, ['--config', notJson, 'migrate']);
    assert.equal(r1.code, 2);
    assert.match(r1.stderr, /--config .*bad\.json: .*JSON/);

    const wrong = path.join(t.dir, 'wrong.json');
    await writeFile(wrong, JSON.stringify({ SLEEVE_BAR: 'x', SLEEVE_RATE_LIMIT: { n: 1 }, SLEEVE_DEMO: 'off' }));
    const r2 = await runCli(t.env, ['--config', wrong, 'migrate']);
    assert.equal(r2.code, 2);
    assert.deepEqual(problems(r2.stderr).sort(), [
      `--config ${wrong}: SLEEVE_RATE_LIMIT must be a string, number or boolean`,
      `--config ${wrong}: unknown key SLEEVE_BAR`,
    ]);

    // A bad value given by the file is named by its variable, like one from the environment.
    const badValue = path.join(t.dir, 'value.json');
    await writeFile(badValue, JSON.stringify({ SLEEVE_RATE_LIMIT: 'lots' }));
    const r3 = await runCli(t.env, ['--config', badValue, 'migrate']);
    assert.equal(r3.code, 2);
    assert.deepEqual(problems(r3.stderr), ['SLEEVE_RATE_LIMIT']);
  });
});
