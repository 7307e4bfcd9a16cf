/*
 * Applications under the ids their clients carry (docs/clients.md): `sleeve app add
 * --client-id ID --client-secret-stdin` registers Picard's built-in client, bad ids and clashes
 * are refused with one clear line and nothing registered, and `sleeve app edit --redirect-uri`
 * replaces the list of redirect URIs, registered loopback ones matching on any port
 * (RFC 8252 §7.3) and everything else exactly.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addUser, authorize, request, startAuthServer, type AuthServer } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, runCli, type CliResult, type TestEnv } from '../helpers/env.js';
import { authorizeUrl, codeOf, exchange, isConsent, OOB, signIn } from './support.js';

/** Picard 2.8's built-in client (picard/const/__init__.py): public, and so is its "secret". */
const PICARD_ID = 'ACa9wsDX19cLp-AeEP-vVw';
const PICARD_SECRET = 'xIsvXbIuntaLuRRhzuazOA';

function assertRefused(r: CliResult, message: RegExp, what: string): void {
  assert.equal(r.code, 2, `${what}: exit ${r.code}\n${r.stderr}`);
  assert.match(r.stderr, message, what);
  assert.ok(!/\n\s+at /.test(r.stderr), `${what}: one line, no stack trace:\n${r.stderr}`);
}

describe(`sleeve app add --client-id, app edit --redirect-uri (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  const cli = (args: string[], stdin?: string) => runCli(t.env, args, stdin === undefined ? {} : { stdin });
  const listedIds = async (): Promise<string[]> => {
    const r = await cli(['--json', 'app', 'list']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout).applications.map((a: { client_id: string }) => a.client_id);
  };

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t);
    await addUser(t, 'alice');
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it("registers Picard's built-in client with the documented command; its secret's newline is not part of it", async () => {
    const r = await cli(['--json', 'app', 'add', '--owner', 'alice', '--name', 'MusicBrainz Picard', '--type', 'public', '--client-id', PICARD_ID, '--client-secret-stdin'], `${PICARD_SECRET}\n`);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { client_id: PICARD_ID, client_secret: PICARD_SECRET });
    const revoke = (secret: string) => request(`${s.base}/oauth2/revoke`, { form: { token: 'x', client_id: PICARD_ID, client_secret: secret } });
    assert.equal((await revoke(PICARD_SECRET)).status, 200, 'the secret given authenticates the client');
    assert.equal((await revoke(`${PICARD_SECRET}\n`)).status, 401, 'the newline was trimmed, not stored');
    // Picard's own request: oob, no PKCE, the classic scopes; its exchange sends the secret in the body.
    const alice = await signIn(s.base, 'alice');
    const scope = 'profile tag rating collection submit_isrc submit_barcode';
    const res = await authorize(alice, s.base, { response_type: 'code', client_id: PICARD_ID, redirect_uri: OOB, scope });
    const ex = await exchange(s.base, { client_id: PICARD_ID, client_secret: PICARD_SECRET }, codeOf(res), OOB);
    assert.equal(ex.status, 200, ex.body);
    assert.equal(typeof ex.json().refresh_token, 'string');
  });

  it('refuses a clash, also of two registrations at once, and keeps the first', async () => {
    const add = (name: string) => cli(['--json', 'app', 'add', '--owner', 'alice', '--name', name, '--type', 'public', '--client-id', 'same-id.1~x']);
    const [a, b] = await Promise.all([add('First'), add('Second')]);
    assert.deepEqual([a.code, b.code].sort(), [0, 2], `${a.stderr}\n${b.stderr}`);
    assertRefused(a.code === 2 ? a : b, /an application with client_id same-id\.1~x already exists/, 'concurrent clash');
    assertRefused(await cli(['app', 'add', '--owner', 'alice', '--name', 'Third', '--type', 'public', '--client-id', PICARD_ID, '--client-secret-stdin'], 'another-secret\n'), /already exists/, 'Picard again');
    assert.equal((await request(`${s.base}/oauth2/revoke`, { form: { token: 'x', client_id: PICARD_ID, client_secret: PICARD_SECRET } })).status, 200, 'the first registration keeps its secret');
    const ok = JSON.parse((a.code === 0 ? a : b).stdout);
    assert.match(ok.client_secret, /^[A-Za-z0-9_-]{43}$/, 'without --client-secret-stdin the secret is generated');
  });

  it('refuses bad ids and secrets with one clear line, registering nothing', async () => {
    const before = await listedIds();
    const add = (id: string[], stdin?: string, type = 'public') => cli(['--json', 'app', 'add', '--owner', 'alice', '--name', 'Bad', '--type', type, ...id, ...(stdin === undefined ? [] : ['--client-secret-stdin'])], stdin);
    const cases: [Promise<CliResult>, RegExp, string][] = [
      [add(['--client-id', 'has space']), /only letters A-Z and a-z, digits and - \. _ ~ \(not a space\)/, 'space'],
      [add(['--client-id', 'quo"te']), /not "\\""/, 'quote'],
      [add(['--client-id', "it's"]), /not "'"/, 'apostrophe'],
      [add(['--client-id', '50%25']), /not "%"/, 'percent'],
      [add(['--client-id', 'ünï']), /not U\+00FC/, 'non-ASCII'],
      [add(['--client-id', 'a\tb']), /not U\+0009/, 'control character'],
      [add(['--client-id', 'x'.repeat(300)]), /at most 200 characters, not 300/, '300 characters'],
      [add(['--client-id=-leading']), /must not start with "-"/, 'leading -'],
      [add(['--client-id', 'https://client.example/id']), /not ":"/, 'a URL'],
      [add(['--client-id', 'ok-id'], ''), /no client secret on standard input/, 'empty stdin'],
      [add(['--client-id', 'ok-id'], 'has space\n'), /printable ASCII characters, without spaces/, 'secret with a space'],
      [add(['--client-id', 'ok-id', '--redirect-uri', 'https://c.example/cb'], 'short\n', 'confidential'), /at least 16 characters/, 'short confidential secret'],
      [add(['--client-id', 'ok-id', '--redirect-uri', 'https://c.example/cb'], `${'s'.repeat(201)}\n`, 'confidential'), /at most 200 characters/, 'long secret'],
    ];
    const results = await Promise.all(cases.map(([r]) => r));
    cases.forEach(([, message, what], i) => assertRefused(results[i] as CliResult, message, what));
    assert.deepEqual(await listedIds(), before, 'nothing was registered');
  });

  it('app edit replaces the list of redirect URIs; registered loopback URIs match on any port, others exactly', async () => {
    const added = await cli(['--json', 'app', 'add', '--owner', 'alice', '--name', 'Web', '--type', 'confidential', '--redirect-uri', 'https://web.example/cb', '--client-id', 'web.app']);
    assert.equal(added.code, 0, added.stderr);
    const web = JSON.parse(added.stdout) as { client_id: string; client_secret: string };
    const edited = await cli(['--json', 'app', 'edit', 'web.app', '--redirect-uri', OOB, '--redirect-uri', 'http://127.0.0.1/callback', '--redirect-uri', 'http://[::1]:8000/cb?x=1']);
    assert.equal(edited.code, 0, edited.stderr);
    assert.deepEqual(JSON.parse(edited.stdout).redirect_uris, [OOB, 'http://127.0.0.1/callback', 'http://[::1]:8000/cb?x=1']);
    const alice = await signIn(s.base, 'alice');
    const consent = async (uri: string) => isConsent(await alice.fetch(authorizeUrl(s.base, { client_id: 'web.app', response_type: 'code', scope: 'profile', redirect_uri: uri })));
    const allowed = [OOB, 'http://127.0.0.1/callback', 'http://127.0.0.1:51234/callback', 'http://[::1]/cb?x=1', 'http://[::1]:1/cb?x=1'];
    const refused = ['https://web.example/cb', 'http://localhost:51234/callback', 'http://127.0.0.1:51234/callback/', 'http://127.0.0.1:51234/other', 'http://[::1]:8000/cb?x=2', 'https://127.0.0.1/callback'];
    for (const uri of allowed) assert.ok(await consent(uri), `${uri} is allowed`);
    for (const uri of refused) assert.ok(!(await consent(uri)), `${uri} is refused`);
    // A code issued for one port is bound to that URI: the exchange must name it exactly.
    const res = await authorize(alice, s.base, { client_id: 'web.app', response_type: 'code', scope: 'profile', redirect_uri: 'http://127.0.0.1:40001/callback' });
    const code = codeOf(res);
    assert.equal((await exchange(s.base, web, code, 'http://127.0.0.1:40002/callback')).status, 400);
    const res2 = await authorize(alice, s.base, { client_id: 'web.app', response_type: 'code', scope: 'profile', redirect_uri: 'http://127.0.0.1:40001/callback' });
    assert.equal((await exchange(s.base, web, codeOf(res2), 'http://127.0.0.1:40001/callback')).status, 200);
  });

  it('a bad redirect URI in app edit changes nothing', async () => {
    const bad = await cli(['app', 'edit', 'web.app', '--redirect-uri', 'https://ok.example/cb', '--redirect-uri', 'http://not-loopback.example/cb']);
    assertRefused(bad, /must use https/, 'http off loopback');
    const r = await cli(['--json', 'app', 'list']);
    const app = JSON.parse(r.stdout).applications.find((a: { client_id: string }) => a.client_id === 'web.app');
    assert.deepEqual(app.redirect_uris, [OOB, 'http://127.0.0.1/callback', 'http://[::1]:8000/cb?x=1']);
    assertRefused(await cli(['app', 'edit', 'web.app', ...Array.from({ length: 11 }, (_, i) => ['--redirect-uri', `https://c.example/${i}`]).flat()]), /at most 10 redirect URLs/, 'eleven URIs');
  });
});
