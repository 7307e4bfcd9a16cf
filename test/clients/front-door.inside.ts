/*
 * Run by test/clients/front-door.test.ts inside private network and mount namespaces (root):
 * sleeve on its default ports, a stand-in for the mirror's web server on 127.0.0.1:5000,
 * Debian's nginx on port 443 with deploy/nginx/musicbrainz-mirror.conf as shipped (only its
 * file paths and the mirror's address replaced), /etc/hosts naming musicbrainz.lan and
 * coverartarchive.org 127.0.0.1 and /etc/ssl/certs trusting the local CA, both bind-mounted in
 * this namespace only. Then the real clients, unchanged, against it.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import http from 'node:http';
import { createHash } from 'node:crypto';
import { readFile, writeFile, mkdtemp, cp, appendFile, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createInterface } from 'node:readline';
import { CoverArtArchiveApi } from 'musicbrainz-api';
import { loadConfig } from '../../src/config/load.js';
import { serve, type Server } from '../../src/serve.js';
import { Browser, PASSWORD } from '../helpers/auth.js';
import { ROOT, cliOk, pollUntil } from '../helpers/env.js';
import { codeOf } from '../auth/support.js';

const DATA = process.env.FRONT_DOOR_DATA as string;
const RELEASE = process.env.FRONT_DOOR_RELEASE as string;
const GROUP = process.env.FRONT_DOOR_GROUP as string;
const MB = 'https://musicbrainz.lan';
const CAA = 'https://coverartarchive.org';
const run = promisify(execFile);
const INTERNAL = /:8443|:8080|:5000|127\.0\.0\.1/;

const md5 = (bytes: Uint8Array) => createHash('md5').update(bytes).digest('hex');
/** The md5 of the image front-door.test.ts gave `sleeve art add`. */
const stored = async () => md5(await readFile(path.join(DATA, 'cover.jpg')));

function sh(cmd: string, args: string[]): void {
  execFileSync(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
}

/** The namespace's /etc/hosts and /etc/ssl/certs (the CA added as update-ca-certificates would). */
async function privateSystemFiles(work: string): Promise<void> {
  sh('ip', ['link', 'set', 'lo', 'up']);
  const hosts = path.join(work, 'hosts');
  await writeFile(hosts, '127.0.0.1 localhost musicbrainz.lan coverartarchive.org eventartarchive.org\n::1 localhost ip6-localhost\n');
  sh('mount', ['--bind', hosts, '/etc/hosts']);
  const certs = path.join(work, 'certs');
  await cp('/etc/ssl/certs', certs, { recursive: true, verbatimSymlinks: true });
  const ca = path.join(DATA, 'tls', 'ca.crt');
  await appendFile(path.join(certs, 'ca-certificates.crt'), await readFile(ca));
  const hash = execFileSync('openssl', ['x509', '-hash', '-noout', '-in', ca], { encoding: 'utf8' }).trim();
  await symlink(ca, path.join(certs, `${hash}.0`));
  sh('mount', ['--bind', certs, '/etc/ssl/certs']);
}

/** A stand-in for the mirror's web server (musicbrainz-docker's musicbrainz:5000). */
function startMirror(): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'x-mirror': 'yes' });
    res.end(JSON.stringify({ mirror: true, path: req.url, host: req.headers.host }));
  });
  return new Promise((resolve) => server.listen(5000, '127.0.0.1', () => resolve(server)));
}

async function startNginx(work: string): Promise<ChildProcess> {
  let conf = await readFile(path.join(ROOT, 'deploy', 'nginx', 'musicbrainz-mirror.conf'), 'utf8');
  for (const [from, to] of [
    ['/var/lib/sleeve/tls/', `${path.join(DATA, 'tls')}/`],
    ['server musicbrainz:5000;', 'server 127.0.0.1:5000;'],
    ['/var/lib/nginx/sleeve-cache', path.join(work, 'sleeve-cache')],
  ] as const) {
    assert.ok(conf.includes(from), `musicbrainz-mirror.conf still has ${from}`);
    conf = conf.split(from).join(to);
  }
  const p = (name: string) => path.join(work, name);
  const main = ['daemon off;', 'master_process off;', `pid ${p('nginx.pid')};`, `error_log ${p('error.log')} warn;`, 'events { worker_connections 64; }', 'http {', '  access_log off;',
    ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k) => `  ${k}_temp_path ${p(k)};`), conf, '}', ''].join('\n');
  await writeFile(p('nginx.conf'), main);
  const nginx = spawn('/usr/sbin/nginx', ['-p', work, '-c', p('nginx.conf'), '-e', p('error.log')], { stdio: ['ignore', 'inherit', 'inherit'] });
  await pollUntil(() => fetch(`${MB}/ws/2/`).then((r) => r.status, () => 0), (s) => s === 200 || nginx.exitCode !== null, 10_000);
  return nginx;
}

/** GET without following redirects. */
function get(url: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { redirect: 'manual', headers });
}

describe('the front door beside a MusicBrainz mirror, and the clients through it', () => {
  let sleeve: Server;
  let mirror: http.Server;
  let nginx: ChildProcess;

  before(async () => {
    const work = await mkdtemp(path.join(tmpdir(), 'sleeve-front-door-'));
    await privateSystemFiles(work);
    mirror = await startMirror();
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('SLEEVE_'))) as Record<string, string>;
    sleeve = await serve(loadConfig(env));
    nginx = await startNginx(work);
  });

  after(async () => {
    nginx?.kill('SIGQUIT');
    await sleeve?.close();
    mirror?.close();
  });

  it('passes /ws/2/ and the website to the mirror, and sleeve its own paths', async () => {
    const ws = await get(`${MB}/ws/2/release/${RELEASE}?fmt=json&inc=artists`);
    assert.equal(ws.headers.get('x-mirror'), 'yes');
    assert.deepEqual(await ws.json(), { mirror: true, path: `/ws/2/release/${RELEASE}?fmt=json&inc=artists`, host: 'musicbrainz.lan' });
    for (const p of ['/', `/release/${RELEASE}`, '/search?query=x', '/static/build/x.js', '/user/alice']) assert.equal((await get(`${MB}${p}`)).headers.get('x-mirror'), 'yes', p);
    const discovery = (await (await get(`${MB}/.well-known/openid-configuration`)).json()) as Record<string, string>;
    assert.equal(discovery.issuer, MB);
    assert.equal(discovery.token_endpoint, `${MB}/oauth2/token`);
    assert.doesNotMatch(JSON.stringify(discovery), INTERNAL);
    for (const p of ['/login', `/release/${RELEASE}/cover-art`, '/static/sleeve.css']) {
      const r = await get(`${MB}${p}`);
      assert.equal(r.status, 200, p);
      assert.equal(r.headers.get('x-mirror'), null, p);
    }
  });

  it('serves the cover art API as coverartarchive.org, every URL a public one', async () => {
    const listing = await get(`${CAA}/release/${RELEASE}/`);
    assert.equal(listing.status, 307);
    assert.equal(listing.headers.get('location'), `${CAA}/download/mbid-${RELEASE}/index.json`);
    const body = (await (await fetch(`${CAA}/release/${RELEASE}/`)).json()) as { release: string; images: { image: string }[] };
    assert.equal(body.release, `${MB}/release/${RELEASE}`);
    assert.match(body.images[0]?.image ?? '', new RegExp(`^${CAA}/release/${RELEASE}/[0-9]+[.]jpg$`));
    const front = await fetch(`${CAA}/release/${RELEASE}/front-250`);
    assert.equal(front.status, 200);
    assert.equal(front.headers.get('content-type'), 'image/jpeg');
  });

  it("never reveals sleeve's internal ports in a Location, whatever the path", async () => {
    const paths = ['/nothing', '/release/', '/release/not-a-uuid', `/release/${RELEASE}`, `/release/${RELEASE}/front-99`, '/download/', '/oauth2/nothing', '/oauth2/authorize', '/account/applications', `/release/${RELEASE}/add-cover-art`, '/..%2f..%2f', '//evil.example/'];
    for (const base of [MB, CAA, 'https://eventartarchive.org']) {
      for (const p of paths) {
        const r = await get(`${base}${p}`);
        const location = r.headers.get('location');
        if (location !== null) assert.doesNotMatch(location, INTERNAL, `${base}${p} → ${location}`);
        assert.ok(r.status < 500, `${base}${p}: ${r.status}`);
      }
    }
  });

  it("musicbrainzngs' CAA module and beets' fetchart (coverart source) read the listing and the front from sleeve", async () => {
    const out = await mkdtemp(path.join(tmpdir(), 'caa-clients-'));
    // Asynchronous: sleeve answers in this process, so its event loop must keep turning.
    const r = await run('/usr/bin/python3', [path.join(ROOT, 'test', 'clients', 'caa_clients.py'), RELEASE, GROUP, out], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, HOME: out } }).catch(
      (err: { code?: unknown; stderr?: string; stdout?: string }) => assert.fail(`exit ${String(err.code)}\n${err.stderr ?? ''}\n${err.stdout ?? ''}`),
    );
    const got = JSON.parse(r.stdout) as { musicbrainzngs: Record<string, unknown>; beets: Record<string, unknown> };
    const ngs = got.musicbrainzngs;
    assert.deepEqual([ngs.release, ngs.types, ngs.front_250_jpeg], [`${MB}/release/${RELEASE}`, ['Front'], true], r.stdout);
    assert.ok((ngs.front_250_bytes as number) > 500);
    assert.match(got.beets.url as string, new RegExp(`^${CAA}/release/${RELEASE}/[0-9]+[.]jpg$`));
    assert.equal(got.beets.jpeg, true, `beets saved ${String(got.beets.path)}`);
  });

  it("Picard's cover art (its CoverArt processor and CAA provider, WebService following the 307s) saves the image sleeve stored", async () => {
    const home = await mkdtemp(path.join(tmpdir(), 'picard-caa-'));
    // Asynchronous: sleeve answers in this process. What runs: see the header of picard_coverart.py.
    const r = await run('/usr/bin/python3', [path.join(ROOT, 'test', 'clients', 'picard_coverart.py'), RELEASE, GROUP], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, QT_QPA_PLATFORM: 'offscreen', HOME: home, XDG_RUNTIME_DIR: home },
    }).catch((err: { code?: unknown; stderr?: string; stdout?: string }) => assert.fail(`exit ${String(err.code)}\n${err.stderr ?? ''}\n${err.stdout ?? ''}`));
    const got = JSON.parse(r.stdout) as { finished: unknown; errors: string[]; images: { md5: string; types: string[]; url: string; front: boolean }[]; messages: string[] };
    assert.deepEqual([got.finished, got.errors], [{ error: null }, []], r.stdout);
    assert.equal(got.images.length, 1, r.stdout);
    assert.deepEqual([got.images[0]?.types, got.images[0]?.front], [['front'], true]);
    assert.match(got.images[0]?.url ?? '', new RegExp(`^${CAA}/release/${RELEASE}/[0-9]+[.]jpg$`));
    assert.equal(got.images[0]?.md5, await stored(), 'Picard saved the bytes sleeve stored');
    // What Picard followed: the listing and the image are both 307s on coverartarchive.org.
    for (const u of [`${CAA}/release/${RELEASE}/`, got.images[0]?.url ?? '']) {
      const r = await get(u);
      assert.equal(r.status, 307, u);
      assert.ok(r.headers.get('location')?.startsWith(`${CAA}/`), u);
    }
    assert.ok(got.messages.some((m) => m.includes('downloaded')), r.stdout);
  });

  it("musicbrainz-api's CoverArtArchiveApi (default host coverartarchive.org) reads the listings and follows the front", async () => {
    const caa = new CoverArtArchiveApi();
    const covers = await caa.getReleaseCovers(RELEASE);
    assert.equal(covers.release, `${MB}/release/${RELEASE}`);
    assert.deepEqual(covers.images.map((i) => [i.types, i.front, i.approved]), [[['Front'], true, true]]);
    const image = covers.images[0]?.image ?? '';
    assert.match(image, new RegExp(`^${CAA}/release/${RELEASE}/[0-9]+[.]jpg$`));
    assert.match(covers.images[0]?.thumbnails['250'] ?? '', new RegExp(`^${CAA}/`));
    const group = await caa.getReleaseGroupCovers(GROUP);
    assert.equal(group.release, `${MB}/release/${RELEASE}`);
    const { url } = await caa.getReleaseCover(RELEASE, 'front');
    assert.ok(url !== null && url.startsWith(`${CAA}/`), `front → ${String(url)}`);
    assert.doesNotMatch(url, INTERNAL);
    assert.equal((await caa.getReleaseGroupCover(GROUP, 'front')).url?.startsWith(`${CAA}/`), true);
    // The application then fetches the URL it was given, as the library's README does.
    for (const u of [url, image]) {
      const r = await fetch(u);
      assert.equal(r.status, 200, u);
      assert.equal(md5(new Uint8Array(await r.arrayBuffer())), await stored(), u);
    }
  });

  it("keeps an API answer a second at most (the recipe's micro-cache), each answer with a request id of its own", async () => {
    const [a, b] = [await get(`${CAA}/release/${RELEASE}/front`), await get(`${CAA}/release/${RELEASE}/front`)];
    assert.equal(a.status, 307);
    assert.equal(a.headers.get('location'), b.headers.get('location'));
    const ids = [a.headers.get('x-request-id'), b.headers.get('x-request-id')];
    for (const id of ids) assert.match(id ?? '', /^[0-9a-f]{32}$/, 'nginx\'s request id');
    assert.notEqual(ids[0], ids[1]);
    // A release not there yet: its 404 may be kept, for a second at most.
    const release = '5eefe000-0000-4000-8000-00000000f00d';
    assert.equal((await get(`${CAA}/release/${release}/front`)).status, 404);
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('SLEEVE_'))) as Record<string, string>;
    await cliOk(env, ['release', 'add', release, '--release-group', GROUP, '--title', 'Behind the micro-cache']);
    await cliOk(env, ['art', 'add', release, path.join(DATA, 'cover.jpg'), '--type', 'Front', '--approved']);
    const seen = await pollUntil(() => get(`${CAA}/release/${release}/front`).then((r) => r.status), (status) => status === 307, 10_000);
    assert.equal(seen.value, 307);
    // One second of keeping, plus the time the commands took to return: well under five.
    assert.ok(seen.ms < 5000, `seen after ${seen.ms} ms`);
  });

  it("Picard's own OAuthManager signs in on port 443, fetches the user name, refreshes, and is logged in", async () => {
    const home = await mkdtemp(path.join(tmpdir(), 'picard-home-'));
    const picard = spawn('/usr/bin/python3', [path.join(ROOT, 'test', 'clients', 'picard_login.py'), 'musicbrainz.lan', '443'], {
      env: { ...process.env, QT_QPA_PLATFORM: 'offscreen', HOME: home, XDG_RUNTIME_DIR: home },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: picard.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
    const next = async () => JSON.parse(((await lines.next()).value as string | undefined) ?? 'null');
    try {
      const { authorization_url: url } = await next();
      const parsed = new URL(url);
      assert.equal(parsed.origin, MB);
      assert.equal(parsed.searchParams.get('client_id'), 'ACa9wsDX19cLp-AeEP-vVw');
      // The user: signs in, allows, and copies the code sleeve shows.
      const user = new Browser();
      assert.equal((await user.login(MB, 'alice', PASSWORD)).status, 303);
      const consent = await user.fetch(url);
      assert.match(consent.body, /MusicBrainz Picard/);
      const answer = await user.fetch(url, { form: { csrf_token: Browser.csrf(consent), decision: 'allow' } });
      picard.stdin?.write(`${codeOf(answer)}\n`);
      const result = await next();
      assert.deepEqual(result.exchanged, [true, null]);
      assert.deepEqual(result.username_fetched, [true, null]);
      assert.equal(result.username, 'alice');
      assert.equal(result.logged_in, true);
      assert.equal(typeof result.access_token, 'string');
      assert.notEqual(result.access_token, result.first_access_token, 'the expired access token was refreshed');
      const info = await fetch(`${MB}/oauth2/userinfo`, { headers: { authorization: `Bearer ${result.access_token}` } });
      assert.equal(info.status, 200);
      assert.equal(((await info.json()) as { sub: string }).sub, 'alice');
      // A refresh token sleeve no longer knows: Picard hears invalid_grant and forgets it.
      const revoked = await fetch(`${MB}/oauth2/revoke`, { method: 'POST', body: new URLSearchParams({ token: result.refresh_token, client_id: 'ACa9wsDX19cLp-AeEP-vVw', client_secret: 'xIsvXbIuntaLuRRhzuazOA' }) });
      assert.equal(revoked.status, 200);
      picard.stdin?.write('refresh\n');
      const again = await next();
      assert.deepEqual([again.access_token, again.authorized], [null, false]);
    } finally {
      picard.kill();
    }
  });
});
