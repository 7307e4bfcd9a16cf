/*
 * `sleeve user add` and `sleeve app add` (docs/cli.md): the
 * password only from standard input, bad input refused with exit 2 and nothing created,
 * and `app add --json` printing credentials that work.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Browser, PASSWORD, request, startAuthServer, type AuthServer } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, runCli, type CliResult, type TestEnv } from '../helpers/env.js';
import { OOB, signIn, tryLogin } from './support.js';

function assertRefused(r: CliResult, message: RegExp, what: string): void {
  assert.equal(r.code, 2, `${what}: exit ${r.code}\n${r.stderr}`);
  assert.match(r.stderr, message, what);
  const err = JSON.parse(r.stdout.trim().split('\n').at(-1) ?? '{}').error;
  assert.equal(typeof err?.code, 'string', `${what}: --json error object on stdout: ${r.stdout}`);
  assert.match(err.message, message, what);
}

describe(`sleeve user add / app add (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  let n = 0;
  /** A sign-in attempt from its own address, so the address throttle never interferes. */
  const login = (name: string, password: string) => tryLogin(s.base, name, password, { 'x-forwarded-for': `192.0.2.${++n}` });
  const userAdd = (args: string[], stdin: string) => runCli(t.env, ['--json', 'user', 'add', ...args], { stdin });
  const appAdd = (args: string[]) => runCli(t.env, ['--json', 'app', 'add', ...args]);

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t, { SLEEVE_TRUST_PROXY: '127.0.0.1' });
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  describe('user add', () => {
    it('adds a user whose password comes from standard input', async () => {
      const r = await userAdd(['alice', '--email', 'alice@example.com', '--password-stdin'], `${PASSWORD}\n`);
      assert.equal(r.code, 0, r.stderr);
      const out = JSON.parse(r.stdout);
      assert.equal(out.name, 'alice');
      assert.equal(typeof out.id, 'number');
      assert.equal((await login('alice', PASSWORD)).status, 303);
      assert.equal((await login('alice', `${PASSWORD}\n`)).status, 400, 'the newline is not part of the password');
    });

    it('reads only the first line, with or without CRLF, and prints a message without --json', async () => {
      const r = await runCli(t.env, ['user', 'add', 'crlf', '--email', 'crlf@example.com', '--password-stdin'], { stdin: 'first-line-pw\r\nsecond line\n' });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /added user crlf/);
      assert.ok(!r.stdout.includes('first-line-pw') && !r.stderr.includes('first-line-pw'), 'the password is never echoed');
      assert.equal((await login('crlf', 'first-line-pw')).status, 303);
    });

    it('never takes the password from the command line', async () => {
      assertRefused(await userAdd(['nopw1', '--email', 'n@example.com'], `${PASSWORD}\n`), /--password-stdin is required/, 'no --password-stdin');
      const r = await userAdd(['nopw2', '--email', 'n@example.com', '--password', PASSWORD], '');
      assert.equal(r.code, 2, r.stderr);
      assertRefused(await userAdd(['nopw3', '--email', 'n@example.com', '--password-stdin'], ''), /no password on standard input/, 'empty stdin');
      for (const name of ['nopw1', 'nopw2', 'nopw3']) assert.equal((await login(name, PASSWORD)).status, 400, `${name} was not created`);
    });

    it('refuses duplicates (in any case), bad emails, short passwords and bad profile fields, creating nothing', async () => {
      const results = await Promise.all([
        userAdd(['alice', '--email', 'other@example.com', '--password-stdin'], 'another password\n'),
        userAdd(['ALICE', '--email', 'other@example.com', '--password-stdin'], 'another password\n'),
        userAdd(['bademail', '--email', 'not-an-email', '--password-stdin'], `${PASSWORD}\n`),
        userAdd(['shortpw', '--email', 's@example.com', '--password-stdin'], '1234567\n'),
        userAdd(['badsite', '--email', 'b@example.com', '--password-stdin', '--website', 'ftp://x'], `${PASSWORD}\n`),
        userAdd(['badzone', '--email', 'b@example.com', '--password-stdin', '--zoneinfo', 'Mars/Olympus'], `${PASSWORD}\n`),
        userAdd(['bad/name', '--email', 'b@example.com', '--password-stdin'], `${PASSWORD}\n`),
        userAdd(['--email', 'b@example.com', '--password-stdin'], `${PASSWORD}\n`),
      ]);
      const expected: [RegExp, string][] = [
        [/already exists/, 'alice'],
        [/already exists/, 'ALICE'],
        [/not an email address/, 'bademail'],
        [/at least 8 characters/, 'shortpw'],
        [/website/, 'badsite'],
        [/time zone/, 'badzone'],
        [/user name/, 'bad/name'],
        [/user add NAME/, '(no name)'],
      ];
      results.forEach((r, i) => assertRefused(r, expected[i]?.[0] as RegExp, expected[i]?.[1] as string));
      assert.equal((await login('alice', 'another password')).status, 400, 'the duplicate did not replace the password');
      assert.equal((await login('alice', PASSWORD)).status, 303);
      for (const name of ['bademail', 'shortpw', 'badsite', 'badzone']) {
        const res = await login(name, name === 'shortpw' ? '1234567' : PASSWORD);
        assert.equal(res.status, 400, `${name} was not created`);
      }
    });

    it('accepts a password of exactly 8 characters', async () => {
      const r = await userAdd(['eight', '--email', 'e@example.com', '--password-stdin'], '12345678\n');
      assert.equal(r.code, 0, r.stderr);
      assert.equal((await login('eight', '12345678')).status, 303);
    });
  });

  it('refuses code lifetimes over 600 s and token lifetimes under 1 s at start-up (decision)', async () => {
    const [code, access] = await Promise.all([
      runCli({ ...t.env, SLEEVE_AUTH_CODE_TTL: '601' }, ['migrate']),
      runCli({ ...t.env, SLEEVE_ACCESS_TOKEN_TTL: '0' }, ['migrate']),
    ]);
    assert.equal(code.code, 2, code.stderr);
    assert.match(code.stderr, /SLEEVE_AUTH_CODE_TTL/);
    assert.equal(access.code, 2, access.stderr);
    assert.match(access.stderr, /SLEEVE_ACCESS_TOKEN_TTL/);
  });

  describe('app add', () => {
    const created: { name: string; client_id: string; client_secret: string }[] = [];

    it('prints {"client_id","client_secret"} with --json; the secret has at least 128 bits', async () => {
      const specs: [string, string, string | undefined][] = [
        ['CLI Web', 'confidential', 'https://client.example/cb'],
        ['CLI Loopback Web', 'confidential', 'http://127.0.0.1:8080/cb'],
        ['CLI Desktop', 'public', undefined],
        ['CLI Desktop Scheme', 'public', 'org.example.app://auth'],
      ];
      const results = await Promise.all(specs.map(([name, type, uri]) => appAdd(['--owner', 'alice', '--name', name, '--type', type, ...(uri === undefined ? [] : ['--redirect-uri', uri])])));
      results.forEach((r, i) => {
        assert.equal(r.code, 0, r.stderr);
        const out = JSON.parse(r.stdout);
        assert.deepEqual(Object.keys(out).sort(), ['client_id', 'client_secret']);
        assert.match(out.client_id, /^[A-Za-z0-9_-]+$/);
        assert.match(out.client_secret, /^[A-Za-z0-9_-]+$/);
        assert.ok(Buffer.from(out.client_secret, 'base64url').length >= 16, `secret of ${out.client_secret.length} characters`);
        created.push({ name: specs[i]?.[0] as string, ...out });
      });
      assert.equal(new Set(created.map((c) => c.client_id)).size, created.length);
      assert.equal(new Set(created.map((c) => c.client_secret)).size, created.length);
    });

    it('prints the credentials and a warning without --json', async () => {
      const r = await runCli(t.env, ['app', 'add', '--owner', 'alice', '--name', 'CLI Human', '--type', 'public']);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /client_id:\s+[A-Za-z0-9_-]+/);
      assert.match(r.stdout, /client_secret:\s+[A-Za-z0-9_-]{22,}/);
      assert.match(r.stdout, /shown once/);
      created.push({ name: 'CLI Human', client_id: '', client_secret: '' });
    });

    it('gives credentials that authenticate the client, and registers the redirect URI', async () => {
      for (const app of created.filter((c) => c.client_id !== '')) {
        const ok = await request(`${s.base}/oauth2/revoke`, { form: { token: 'x', client_id: app.client_id, client_secret: app.client_secret } });
        assert.equal(ok.status, 200, app.name);
        const wrong = await request(`${s.base}/oauth2/revoke`, { form: { token: 'x', client_id: app.client_id, client_secret: `${app.client_secret}x` } });
        assert.equal(wrong.status, 401, app.name);
      }
      const alice = await signIn(s.base, 'alice');
      const web = created[0] as (typeof created)[number];
      const desktop = created[2] as (typeof created)[number];
      const consent = (clientId: string, uri: string) => alice.fetch(`${s.base}/oauth2/authorize?${new URLSearchParams({ client_id: clientId, response_type: 'code', scope: 'profile', redirect_uri: uri })}`);
      assert.match((await consent(web.client_id, 'https://client.example/cb')).body, /CLI Web<\/strong> is requesting permission/);
      assert.equal((await consent(web.client_id, OOB)).status, 400);
      assert.match((await consent(desktop.client_id, OOB)).body, /CLI Desktop<\/strong> is requesting permission/);
    });

    it('refuses bad input with exit 2 and registers nothing', async () => {
      const cases: [string[], RegExp][] = [
        [['--owner', 'alice', '--name', 'Bad 1', '--type', 'web', '--redirect-uri', 'https://x.example/cb'], /confidential or public/],
        [['--owner', 'alice', '--name', 'Bad 2'], /confidential or public/],
        [['--owner', 'alice', '--name', 'Bad 3', '--type', 'confidential'], /redirect URL must be entered/],
        [['--owner', 'alice', '--name', 'Bad 4', '--type', 'confidential', '--redirect-uri', 'http://x.example/cb'], /must use https/],
        [['--owner', 'alice', '--name', 'Bad 5', '--type', 'confidential', '--redirect-uri', 'https://x.example/cb#f'], /fragment/],
        [['--owner', 'alice', '--name', 'Bad 7', '--type', 'public', '--redirect-uri', 'https://x.example/cb'], /reverse-DNS/],
        [['--owner', 'nobody', '--name', 'Bad 9', '--type', 'public'], /no user nobody/],
        [['--owner', 'alice', '--type', 'public'], /needs a name/],
        [['--owner', 'alice', '--name', 'Bad 13', '--type', 'public', '--bogus'], /bogus/],
        [['--owner', 'alice', '--name', 'Bad 14', '--type', 'confidential', '--redirect-uri', 'http://localhost:99999/cb'], /between 1 and 65535, not 99999/],
        [['--owner', 'alice', '--name', 'Bad 15', '--type', 'confidential', '--redirect-uri', 'https://x.example:0/cb'], /not 0/],
        [['--owner', 'alice', '--name', 'Bad 16', '--type', 'confidential', '--redirect-uri', 'https://me:pw@x.example/cb'], /user name or password/],
        [['--owner', 'alice', '--name', 'Bad 17', '--type', 'public', '--redirect-uri', 'org.example.app://auth:70000/cb'], /not 70000/],
        [['--owner', 'alice', '--name', 'Bad 18', '--type', 'confidential', '--redirect-uri', 'https://x.example/a\tb'], /control characters/],
      ];
      const results = await Promise.all(cases.map(([args]) => appAdd(args)));
      results.forEach((r, i) => assertRefused(r, cases[i]?.[1] as RegExp, (cases[i]?.[0] as string[]).join(' ')));
      const b = new Browser();
      await b.login(s.base, 'alice', PASSWORD);
      const page = await b.fetch(`${s.base}/account/applications`);
      const listed = [...page.body.matchAll(/<div class="card"><h3>([^<]*)<\/h3>/g)].map((m) => m[1]).sort();
      assert.deepEqual(listed, created.map((c) => c.name).sort(), 'exactly the applications added successfully');
    });
  });
});
