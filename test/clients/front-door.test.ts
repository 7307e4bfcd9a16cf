/*
 * deploy/nginx/musicbrainz-mirror.conf and the real clients, unmodified (docs/clients.md): this
 * file prepares a data folder with the CLI (a local CA from `sleeve tls init`, a user, Picard's
 * built-in application, a release with a cover), then runs front-door.inside.js in private
 * network and mount namespaces (`unshare --net --mount`, as root), where sleeve and nginx listen
 * on their real ports (443 among them) and /etc/hosts and the trusted CAs are the namespace's
 * own: nothing on the machine changes. SQLite only (PostgreSQL is not reachable from a private
 * network namespace, and the clients cannot tell).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PASSWORD } from '../helpers/auth.js';
import { cliOk, DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { newMbid } from '../cover-art/cli-support.js';

const NEEDS: [string, string][] = [
  ['/usr/sbin/nginx', 'nginx'],
  ['/usr/lib/picard/picard/oauth.py', 'picard'],
  ['/usr/bin/unshare', 'util-linux'],
];
const missing = NEEDS.filter(([p]) => !existsSync(p)).map(([, pkg]) => pkg);
const unavailable =
  process.platform !== 'linux'
    ? 'needs Linux namespaces'
    : process.getuid?.() !== 0
      ? 'needs root (unshare --net --mount, port 443)'
      : missing.length > 0
        ? `needs Debian's ${missing.join(', ')} (.ci/run installs them)`
        : undefined;
if (unavailable !== undefined) {
  // Never silently; and .ci/run (as root, with the packages) sets SLEEVE_TEST_REQUIRE_CLIENTS=1: there it must run.
  process.stderr.write(`\n*** test/clients/front-door.test.ts SKIPPED: ${unavailable}\n\n`);
  if (process.env.SLEEVE_TEST_REQUIRE_CLIENTS === '1') throw new Error(`the clients test cannot run, and .ci/run requires it: ${unavailable}`);
}

const INSIDE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'front-door.inside.js');

describe(`the clients through deploy/nginx/musicbrainz-mirror.conf (sqlite; this pass: ${DIALECT})`, { skip: unavailable }, () => {
  let t: TestEnv;
  const release = newMbid();
  const group = newMbid();

  before(async () => {
    // SQLite whatever the pass: see the header.
    t = await makeTestEnv();
    delete t.env.SLEEVE_DATABASE_URL;
    Object.assign(t.env, {
      SLEEVE_AUTH_URL: 'https://musicbrainz.lan',
      SLEEVE_BASE_URL: 'https://coverartarchive.org',
      SLEEVE_MUSICBRAINZ_URL: 'https://musicbrainz.lan',
      SLEEVE_COVERART_LISTEN: '127.0.0.1:8080',
      SLEEVE_AUTH_LISTEN: '127.0.0.1:8443',
      SLEEVE_METRICS_LISTEN: 'off',
      SLEEVE_TRUST_PROXY: '127.0.0.1',
      // Picard keeps a token until 60 s before it expires: a 60 s token makes it refresh at once.
      SLEEVE_ACCESS_TOKEN_TTL: '60',
    });
    await cliOk(t.env, ['tls', 'init', '--name', 'musicbrainz.lan', '--name', 'coverartarchive.org', '--name', 'eventartarchive.org']);
    await cliOk(t.env, ['migrate']);
    await cliOk(t.env, ['user', 'add', 'alice', '--email', 'alice@example.com', '--password-stdin'], { stdin: `${PASSWORD}\n` });
    // The documented command (docs/clients.md), Picard's id and secret as its source has them.
    await cliOk(t.env, ['app', 'add', '--owner', 'alice', '--name', 'MusicBrainz Picard', '--type', 'public', '--client-id', 'ACa9wsDX19cLp-AeEP-vVw', '--client-secret-stdin'], { stdin: 'xIsvXbIuntaLuRRhzuazOA\n' });
    await cliOk(t.env, ['release', 'add', release, '--release-group', group, '--title', 'Through the front door']);
    const cover = path.join(t.dir, 'cover.jpg');
    await writeFile(cover, await makeJpeg(600, 600));
    await cliOk(t.env, ['art', 'add', release, cover, '--type', 'Front', '--approved']);
  });

  after(async () => {
    await t?.cleanup();
  });

  it('passes every check run inside the namespaces (see front-door.inside.ts)', async () => {
    const env: Record<string, string | undefined> = { ...process.env, ...t.env, FRONT_DOOR_DATA: t.dir, FRONT_DOOR_RELEASE: release, FRONT_DOOR_GROUP: group, NODE_EXTRA_CA_CERTS: path.join(t.dir, 'tls', 'ca.crt') };
    // A test run of its own, not a child of this one.
    delete env.NODE_TEST_CONTEXT;
    const child = spawn('unshare', ['--net', '--mount', '--', process.execPath, '--test', '--test-reporter=spec', INSIDE], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    // Bounded: a client that hangs fails the test with what was written so far.
    const timer = setTimeout(() => child.kill('SIGKILL'), 180_000);
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    clearTimeout(timer);
    process.stdout.write(out.replace(/^/gm, '    '));
    assert.equal(code, 0, `inside the namespaces:\n${out}`);
    assert.match(out, /ℹ pass [1-9]/);
    assert.match(out, /ℹ fail 0/);
  });
});
