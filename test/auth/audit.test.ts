/*
 * The audit trail (docs/observability.md, "Audit trail"): at the default log level, one JSON line per
 * security event of the pages, the OAuth endpoints and the CLI (`user add`, `app add`,
 * `app edit`, on stderr), with who, from where and which application, and never a
 * password, secret, code, token or cookie.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { authorize, Browser, PASSWORD, type HttpsResponse } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, runCli, type CliResult, type TestEnv } from '../helpers/env.js';
import { codeOf, exchange, OOB, revoke, signIn, startLoggedAuthServer, type Client, type Tokens } from './support.js';

type Line = Record<string, unknown>;

function jsonLines(text: string): Line[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line);
}

/** The one audit line of `event` matching `fields` (each field equal); fails unless exactly one matches. */
function auditLine(lines: Line[], event: string, fields: Record<string, string>): Line {
  const found = lines.filter((l) => l.audit === event && Object.entries(fields).every(([k, v]) => l[k] === v));
  assert.equal(found.length, 1, `one ${event} line with ${JSON.stringify(fields)}; audit lines: ${JSON.stringify(lines.filter((l) => l.audit !== undefined))}`);
  const line = found[0] as Line;
  assert.equal(line.level, 30, 'at info level');
  assert.equal(line.msg, 'audit');
  return line;
}

describe(`audit trail (${DIALECT})`, () => {
  let t: TestEnv;
  let s: Awaited<ReturnType<typeof startLoggedAuthServer>>;
  let alice: Browser;
  /** Every secret value seen: none may appear in any log. */
  const secrets = new Set<string>([PASSWORD]);
  const keep = (...values: (string | undefined)[]) => values.forEach((v) => v !== undefined && v !== '' && secrets.add(v));
  const keepTokens = (tokens: Tokens) => keep(tokens.access_token, tokens.refresh_token);
  /** Everything the CLI wrote on stderr and stdout. */
  const cliOutput: CliResult[] = [];
  const cli = async (args: string[], stdin?: string): Promise<CliResult> => {
    const r = await runCli(t.env, args, stdin === undefined ? {} : { stdin });
    assert.equal(r.code, 0, `sleeve ${args.join(' ')}: ${r.stderr}`);
    cliOutput.push(r);
    return r;
  };
  let cliApp: Client;
  let desktop: Client;
  const list = () => alice.fetch(`${s.base}/account/applications`);
  const csrf = async () => Browser.csrf(await list());
  const appIdOf = (page: HttpsResponse, name: string) => {
    const card = page.body.split('<div class="card">').find((c) => c.includes(`<h3>${name}</h3>`) && c.includes('/account/applications/edit/'));
    const id = /\/account\/applications\/edit\/(\d+)/.exec(card ?? '')?.[1];
    assert.ok(id, `${name} is listed`);
    return id;
  };
  /** GET the confirmation page, POST its form; expects the 303. */
  const confirm = async (path: string) => {
    const ask = await alice.fetch(`${s.base}${path}`);
    const res = await alice.fetch(`${s.base}${path}`, { form: { csrf_token: Browser.csrf(ask) } });
    assert.equal(res.status, 303, res.body.slice(0, 300));
  };
  const shownSecret = async () => {
    const m = /<dt>Client ID<\/dt><dd><code>([^<]+)<\/code><\/dd><dt>Client secret<\/dt><dd><code>([^<]+)<\/code>/.exec((await list()).body);
    assert.ok(m, 'the new secret is shown');
    keep(m[2]);
    return { client_id: m[1] as string, client_secret: m[2] as string };
  };

  before(async () => {
    // The default log level (tests otherwise run at warn): audit lines are on without asking.
    t = await makeTestEnv({ SLEEVE_LOG_LEVEL: 'info' });
    s = await startLoggedAuthServer(t);
    await cli(['--json', 'user', 'add', 'alice', '--email', 'alice@example.com', '--password-stdin'], `${PASSWORD}\n`);
    cliApp = JSON.parse((await cli(['--json', 'app', 'add', '--owner', 'alice', '--name', 'CLI App', '--type', 'confidential', '--redirect-uri', 'https://cli.example/cb'])).stdout);
    desktop = JSON.parse((await cli(['--json', 'app', 'add', '--owner', 'alice', '--name', 'Desktop', '--type', 'public', '--resource-server'])).stdout);
    keep(cliApp.client_secret, desktop.client_secret);
    await cli(['--json', 'app', 'edit', cliApp.client_id, '--resource-server']);
    alice = await signIn(s.base, 'alice');

    // On the pages: register, edit, reset the secret.
    assert.equal((await alice.fetch(`${s.base}/account/applications/register`, { form: { csrf_token: await csrf(), name: 'Page App', kind: 'public', redirect_uri: '' } })).status, 303);
    const pageApp = await shownSecret();
    const id = appIdOf(await list(), 'Page App');
    assert.equal((await alice.fetch(`${s.base}/account/applications/edit/${id}`, { form: { csrf_token: await csrf(), name: 'Page App 2', redirect_uri: '' } })).status, 303);
    await confirm(`/account/applications/reset-secret/${id}`);
    const renewed = await shownSecret();
    keep(pageApp.client_secret, renewed.client_secret);

    // Consent given (and its tokens), then denied.
    const allowed = await authorize(alice, s.base, { client_id: desktop.client_id, response_type: 'code', scope: 'profile email', redirect_uri: 'http://127.0.0.1:7000/cb', state: 'st' });
    const code = codeOf(allowed);
    keep(code);
    const ex = await exchange(s.base, desktop, code, 'http://127.0.0.1:7000/cb');
    assert.equal(ex.status, 200, ex.body);
    const tokens = ex.json() as Tokens;
    keepTokens(tokens);
    const denied = await authorize(alice, s.base, { client_id: desktop.client_id, response_type: 'code', scope: 'profile', redirect_uri: OOB }, 'deny');
    assert.equal(denied.status, 303);

    // Through /oauth2/revoke: the access token of an offline grant, then the refresh token (the grant).
    assert.equal((await revoke(s.base, desktop, tokens.access_token)).status, 200);
    assert.equal((await revoke(s.base, desktop, tokens.refresh_token as string)).status, 200);
    assert.equal((await revoke(s.base, desktop, 'not-a-token')).status, 200);

    // On the page: a second grant, revoked; then the page's application removed.
    const again = await authorize(alice, s.base, { client_id: desktop.client_id, response_type: 'code', scope: 'profile', redirect_uri: OOB });
    const second = await exchange(s.base, desktop, codeOf(again), OOB);
    keep(codeOf(again));
    keepTokens(second.json());
    const grantId = /\/account\/applications\/revoke\/(\d+)/.exec((await list()).body)?.[1];
    assert.ok(grantId);
    await confirm(`/account/applications/revoke/${grantId}`);
    await confirm(`/account/applications/remove/${id}`);

    // A replayed code revokes what its first use issued.
    const third = codeOf(await authorize(alice, s.base, { client_id: desktop.client_id, response_type: 'code', scope: 'profile', redirect_uri: OOB }));
    keep(third);
    const firstUse = await exchange(s.base, desktop, third, OOB);
    assert.equal(firstUse.status, 200);
    keepTokens(firstUse.json());
    assert.equal((await exchange(s.base, desktop, third, OOB)).status, 400);
    keep(...alice.jar.values());
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('logs each event of the pages and OAuth endpoints once, with who, from where and which application', () => {
    const lines = jsonLines(s.logs());
    const pageApp = auditLine(lines, 'app.registered', { user: 'alice', address: '127.0.0.1' }).clientId as string;
    assert.match(pageApp, /^[A-Za-z0-9_-]{32}$/);
    auditLine(lines, 'app.changed', { user: 'alice', clientId: pageApp, address: '127.0.0.1' });
    auditLine(lines, 'app.secret_reset', { user: 'alice', clientId: pageApp, address: '127.0.0.1' });
    auditLine(lines, 'app.removed', { user: 'alice', clientId: pageApp, address: '127.0.0.1' });
    const given = lines.filter((l) => l.audit === 'consent.given');
    assert.equal(given.length, 3);
    assert.deepEqual(given[0], { ...given[0], user: 'alice', clientId: desktop.client_id, scope: 'profile email', reason: 'offline', address: '127.0.0.1' });
    auditLine(lines, 'consent.denied', { user: 'alice', clientId: desktop.client_id, scope: 'profile', address: '127.0.0.1' });
    auditLine(lines, 'token.revoked', { user: 'alice', clientId: desktop.client_id, via: 'oauth2/revoke' });
    auditLine(lines, 'grant.revoked', { user: 'alice', clientId: desktop.client_id, via: 'oauth2/revoke' });
    auditLine(lines, 'grant.revoked', { user: 'alice', clientId: desktop.client_id, via: 'account page', address: '127.0.0.1' });
    auditLine(lines, 'grant.revoked', { user: 'alice', clientId: desktop.client_id, via: 'oauth2/token', reason: 'code_replayed', address: '127.0.0.1' });
    assert.equal(lines.filter((l) => l.audit === 'grant.revoked' || l.audit === 'token.revoked').length, 4, 'an unknown token revokes nothing and logs nothing');
  });

  it('logs the CLI events as JSON lines on stderr', () => {
    const lines = cliOutput.flatMap((r) => jsonLines(r.stderr));
    auditLine(lines, 'user.created', { user: 'alice', via: 'cli' });
    auditLine(lines, 'app.registered', { user: 'alice', clientId: cliApp.client_id, via: 'cli' });
    auditLine(lines, 'app.registered', { user: 'alice', clientId: desktop.client_id, via: 'cli', reason: 'resource_server' });
    auditLine(lines, 'app.changed', { clientId: cliApp.client_id, via: 'cli', reason: 'resource_server' });
    for (const r of cliOutput) {
      const out = r.stdout.trim().split('\n');
      assert.equal(out.length, 1, 'stdout keeps its one --json line');
      assert.equal(JSON.parse(out[0] as string).audit, undefined, 'the audit line is not on stdout');
    }
  });

  it('never logs a password, secret, code, token or cookie', () => {
    const logs = s.logs() + cliOutput.map((r) => r.stderr).join('\n');
    assert.ok(secrets.size >= 12, `collected ${secrets.size} secrets`);
    for (const secret of secrets) assert.ok(!logs.includes(secret), `a secret in the logs: ${secret.slice(0, 6)}…`);
  });
});
