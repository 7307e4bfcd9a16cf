/*
 * deploy/nginx/sleeve.conf, as shipped: Debian's nginx started as a process of this user
 * with that server block (its paths and ports pointed at this test's store and sleeve),
 * compared with sleeve's own /download/ answer by answer: headers and bytes.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliInProcess, DIALECT, freePort, makeTestEnv, pollUntil, ROOT, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { newMbid } from '../cover-art/cli-support.js';

/** Where Debian puts nginx (the PATH of a non-root shell may lack /usr/sbin). */
const NGINX = process.env.SLEEVE_TEST_NGINX ?? '/usr/sbin/nginx';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** Headers that belong to the server or the connection, not to the file. */
const OWN = new Set(['date', 'connection', 'keep-alive', 'x-request-id', 'server', 'etag']);

async function ask(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Answer> {
  const res = await fetch(url, { headers, method, redirect: 'manual' });
  const out: Record<string, string> = {};
  res.headers.forEach((v, k) => {
    if (!OWN.has(k)) out[k] = v;
  });
  return { status: res.status, headers: out, body: Buffer.from(await res.arrayBuffer()) };
}

/** The ETag of an answer (compared apart: each server makes its own). */
async function etagOf(url: string): Promise<string | null> {
  return (await fetch(url, { method: 'HEAD' })).headers.get('etag');
}

/** The shipped configuration with this test's store, sleeve and port, inside a main file of its own. */
async function nginxConfig(prefix: string, storeDir: string, sleeveHostPort: string, port: number): Promise<string> {
  let server = await readFile(path.join(ROOT, 'deploy', 'nginx', 'sleeve.conf'), 'utf8');
  for (const [from, to] of [
    ['/var/lib/sleeve/files', storeDir],
    ['server 127.0.0.1:8080;', `server ${sleeveHostPort};`],
    ['listen 80;', `listen 127.0.0.1:${port};`],
  ] as const) {
    assert.ok(server.includes(from), `deploy/nginx/sleeve.conf still has ${from}`);
    server = server.split(from).join(to);
  }
  const p = (name: string) => path.join(prefix, name);
  return [
    'daemon off;',
    // One process, of this user: no master dropping to another user.
    'master_process off;',
    `pid ${p('nginx.pid')};`,
    `error_log ${p('error.log')} warn;`,
    'events { worker_connections 64; }',
    'http {',
    '  access_log off;',
    '  default_type application/octet-stream;',
    `  client_body_temp_path ${p('body')};`,
    `  proxy_temp_path ${p('proxy')};`,
    `  fastcgi_temp_path ${p('fastcgi')};`,
    `  uwsgi_temp_path ${p('uwsgi')};`,
    `  scgi_temp_path ${p('scgi')};`,
    server,
    '}',
    '',
  ].join('\n');
}

describe(`deploy/nginx/sleeve.conf against sleeve's /download/ (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  let prefix: string;
  let nginx: ChildProcess | undefined;
  let nginxLog = '';
  let front: string;
  const R = newMbid();
  let jpg: string;
  let png: string;

  before(async () => {
    t = await makeTestEnv();
    await cliInProcess(t.env, ['release', 'add', R, '--release-group', newMbid(), '--title', 'Behind nginx']);
    for (const [name, bytes] of [
      ['a.jpg', await makeJpeg(640, 480)],
      ['b.png', await makePng(300, 200)],
    ] as const) {
      await writeFile(path.join(t.dir, name), bytes);
    }
    jpg = ((await cliInProcess(t.env, ['--json', 'art', 'add', R, path.join(t.dir, 'a.jpg'), '--type', 'Front', '--approved'])) as { id: string }).id;
    png = ((await cliInProcess(t.env, ['--json', 'art', 'add', R, path.join(t.dir, 'b.png'), '--approved'])) as { id: string }).id;
    s = await startServer(t);

    prefix = await mkdtemp(path.join(tmpdir(), 'sleeve-nginx-'));
    const port = await freePort();
    front = `http://127.0.0.1:${port}`;
    await writeFile(path.join(prefix, 'nginx.conf'), await nginxConfig(prefix, path.join(t.dir, 'files'), new URL(s.base).host, port));
    nginx = spawn(NGINX, ['-p', prefix, '-c', path.join(prefix, 'nginx.conf'), '-e', path.join(prefix, 'error.log')], { stdio: ['ignore', 'pipe', 'pipe'] });
    nginx.stderr?.on('data', (c: Buffer) => (nginxLog += c.toString()));
    nginx.on('error', (err) => (nginxLog += `${err.message}\n`));
    const { value } = await pollUntil(
      () => fetch(`${front}/robots.txt`).then((r) => r.status, () => 0),
      (v) => v !== 0 || nginx?.exitCode !== null,
      10_000,
    );
    assert.equal(value, 200, `nginx answers, through to sleeve (exit ${nginx.exitCode}): ${nginxLog}`);
  });

  after(async () => {
    if (nginx !== undefined && nginx.exitCode === null) {
      const exited = new Promise((r) => nginx?.once('exit', r));
      nginx.kill('SIGQUIT');
      await exited;
    }
    await s?.server.close();
    await t?.cleanup();
    if (prefix !== undefined) await rm(prefix, { recursive: true, force: true });
  });

  const key = {
    original: () => `mbid-${R}/mbid-${R}-${jpg}.jpg`,
    png: () => `mbid-${R}/mbid-${R}-${png}.png`,
    thumbnail: () => `mbid-${R}/mbid-${R}-${jpg}_thumb250.jpg`,
    bigThumbnail: () => `mbid-${R}/mbid-${R}-${png}_thumb1200.jpg`,
    index: () => `mbid-${R}/index.json`,
  };

  /** The same request to both; their answers as they must agree. */
  async function both(rest: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ sleeve: Answer; nginx: Answer; etags: [string | null, string | null] }> {
    const a = await ask(`${s.base}/download/${rest}`, headers, method);
    const b = await ask(`${front}/download/${rest}`, headers, method);
    return { sleeve: a, nginx: b, etags: [await etagOf(`${s.base}/download/${rest}`), await etagOf(`${front}/download/${rest}`)] };
  }

  for (const [what, k] of [
    ['an original JPEG', key.original],
    ['an original PNG', key.png],
    ['a 250 px thumbnail', key.thumbnail],
    ['a 1200 px thumbnail', key.bigThumbnail],
    ['index.json', key.index],
  ] as const) {
    it(`sends ${what} with sleeve's headers and bytes, GET and HEAD`, async () => {
      for (const method of ['GET', 'HEAD']) {
        const r = await both(k(), {}, method);
        assert.equal(r.sleeve.status, 200, `${method} ${what} from sleeve`);
        assert.deepEqual(r.nginx, r.sleeve, `${method} ${what}: nginx answers as sleeve does`);
        for (const etag of r.etags) assert.match(etag ?? '', /^"[\x21\x23-\x7e]+"$/, 'a strong ETag');
      }
      const r = await both(k());
      assert.ok(r.sleeve.body.equals(await readFile(path.join(t.dir, 'files', k()))));
      assert.equal(r.sleeve.headers['access-control-allow-origin'], '*');
      assert.equal(r.sleeve.headers['content-security-policy'], 'sandbox');
      assert.equal(r.sleeve.headers['cache-control'], k().endsWith('.json') ? 'public, no-cache' : 'public, max-age=31536000, immutable');
    });
  }

  it('answers a Range request alike (206, Content-Range, the bytes)', async () => {
    for (const range of ['bytes=0-99', 'bytes=100-', 'bytes=-50']) {
      const r = await both(key.original(), { range });
      assert.equal(r.sleeve.status, 206, range);
      // nginx says Accept-Ranges on its 200s only; on a 206 it says nothing new.
      const { 'accept-ranges': acceptRanges, ...rest } = r.sleeve.headers;
      assert.equal(acceptRanges, 'bytes');
      assert.deepEqual(r.nginx, { ...r.sleeve, headers: rest }, range);
    }
  });

  it('answers If-None-Match with its own ETag with 304, keeping the headers of the file', async () => {
    for (const k of [key.original(), key.thumbnail(), key.index()]) {
      const first = await both(k);
      const [sleeveTag, nginxTag] = first.etags;
      const a = await ask(`${s.base}/download/${k}`, { 'if-none-match': sleeveTag as string });
      const b = await ask(`${front}/download/${k}`, { 'if-none-match': nginxTag as string });
      assert.equal(a.status, 304, k);
      assert.deepEqual(b, a, `${k}: the same 304`);
      assert.equal(a.body.length, 0);
      // Each server's ETag is its own (nginx: modification time and size): the other's is not a match.
      const cross = await ask(`${front}/download/${k}`, { 'if-modified-since': first.sleeve.headers['last-modified'] as string });
      assert.equal(cross.status, 304, `${k}: If-Modified-Since works across both`);
    }
  });

  it('says 404 alike for a missing image, a missing index.json and names outside the layout', async () => {
    for (const rest of [
      `mbid-${R}/mbid-${R}-1.jpg`,
      `mbid-${R}/mbid-${R}-${jpg}_thumb100.jpg`,
      `mbid-${newMbid()}/index.json`,
      `mbid-${R}/../../sleeve.db`,
      `mbid-${R}/%2e%2e/%2e%2e/sleeve.db`,
      'sleeve.db',
    ]) {
      const r = await both(rest);
      assert.doesNotMatch(r.nginx.body.toString('latin1'), /SQLite/, rest);
      // Dot segments (fetch resolves the plain ones first) end in a 4xx from both; the rest are sleeve's 404.
      if (rest.includes('..') || rest.includes('%2e')) {
        for (const status of [r.sleeve.status, r.nginx.status]) assert.ok(status >= 400 && status < 500, `${rest}: ${status}`);
      } else {
        assert.equal(r.sleeve.status, 404, rest);
        assert.deepEqual(r.nginx, r.sleeve, rest);
      }
    }
  });

  it('leaves the API to sleeve', async () => {
    const res = await fetch(`${front}/release/${R}/front`, { redirect: 'manual' });
    assert.equal(res.status, 307);
    assert.equal(res.headers.get('location'), `${s.base}/download/${key.original()}`);
  });
});
