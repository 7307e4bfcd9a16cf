/*
 * Refresh token rotation, opt-in per application (docs/decisions.md, "Refresh token rotation"):
 * openid-client 6 with its default discovery refreshes with and without rotation; a used
 * refresh token presented again within the grace window gets the same answer, after it (the
 * clock moved) the grant ends; ten concurrent refreshes with one token all get one answer;
 * reuse is audited; a database that is busy or away answers 503, never 400.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import * as client from 'openid-client';
import pg from 'pg';
import { addApp, addUser, authorize, Browser, request, startAuthServer, type AuthServer, type HttpsResponse } from '../helpers/auth.js';
import { ManualClock } from '../helpers/clock.js';
import { cliInProcess, DIALECT, makeTestEnv, pollUntil, runCli, type TestEnv } from '../helpers/env.js';
import { fetchTrustingDataDir } from '../helpers/openid-fetch.js';
import { assertOAuthError, grant, OOB, refresh, signIn, startLoggedAuthServer, userinfoStatus, type Client, type Tokens } from './support.js';

const WEB_URI = 'https://client.example/callback';
const GRACE_SECONDS = 10;

/** openid-client's error for a 400 invalid_grant answer. */
function invalidGrant(err: Error & { error?: string; status?: number }): boolean {
  assert.equal(err.error, 'invalid_grant');
  assert.equal(err.status, 400);
  return true;
}

describe(`refresh token rotation (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  const clock = new ManualClock();
  let alice: Browser;
  /** A public application without rotation, one with it (from `app add`), a web application with it (from `app edit`). */
  let plain: Client;
  let rotating: Client;
  let rotatingWeb: Client;
  let customFetch: client.CustomFetch;

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t, { SLEEVE_REFRESH_GRACE_SECONDS: String(GRACE_SECONDS) }, clock);
    customFetch = fetchTrustingDataDir(t.env.SLEEVE_DATA_DIR);
    await addUser(t, 'alice');
    plain = await addApp(t, 'alice', 'public', undefined, 'Plain Desktop');
    const added = await cliInProcess(t.env, ['--json', 'app', 'add', '--owner', 'alice', '--name', 'Rotating Desktop', '--type', 'public', '--rotate-refresh-tokens']);
    assert.equal(added.rotate_refresh_tokens, true);
    rotating = { client_id: added.client_id, client_secret: added.client_secret };
    rotatingWeb = await addApp(t, 'alice', 'confidential', WEB_URI, 'Rotating Web');
    const edited = await cliInProcess(t.env, ['--json', 'app', 'edit', rotatingWeb.client_id, '--rotate-refresh-tokens']);
    assert.equal(edited.rotate_refresh_tokens, true);
    alice = await signIn(s.base, 'alice');
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  const desktopGrant = (app: Client): Promise<Tokens> => grant(alice, s.base, app, { redirect_uri: OOB, scope: 'profile' });

  async function introspectActive(app: Client, tok: string): Promise<boolean> {
    const res = await request(`${s.base}/oauth2/introspect`, { form: { token: tok, client_id: app.client_id, client_secret: app.client_secret } });
    assert.equal(res.status, 200, res.body);
    return res.json().active as boolean;
  }

  /** openid-client's default discovery for this application, and a code flow with PKCE and offline access. */
  async function openidTokens(app: Client) {
    const config = await client.discovery(new URL(s.base), app.client_id, app.client_secret, undefined, { [client.customFetch]: customFetch });
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: WEB_URI,
      scope: 'openid profile',
      access_type: 'offline',
      approval_prompt: 'force',
      state,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    const res = await authorize(alice, s.base, Object.fromEntries(url.searchParams));
    assert.equal(res.status, 302, res.body.slice(0, 300));
    const tokens = await client.authorizationCodeGrant(config, new URL(String(res.headers.location)), { pkceCodeVerifier: verifier, expectedState: state });
    return { config, tokens };
  }

  describe('registration', () => {
    it('app list and the application page show rotation; app edit turns it off and on; contradicting flags are refused', async () => {
      const listed = await cliInProcess(t.env, ['--json', 'app', 'list']);
      const by = (id: string) => listed.applications.find((a: { client_id: string }) => a.client_id === id);
      assert.equal(by(rotating.client_id).rotate_refresh_tokens, true);
      assert.equal(by(rotatingWeb.client_id).rotate_refresh_tokens, true);
      assert.equal(by(plain.client_id).rotate_refresh_tokens, undefined, 'said only when on');
      const human = await runCli(t.env, ['app', 'list']);
      assert.match(human.stdout, /ROTATION/);

      const page = await alice.fetch(`${s.base}/account/applications`);
      assert.equal(page.status, 200);
      assert.match(page.body, /Rotating Desktop<\/h3>[\s\S]*?<dt>Refresh tokens<\/dt><dd>a new one on every refresh/);
      assert.match(page.body, /Plain Desktop<\/h3>[\s\S]*?<dt>Refresh tokens<\/dt><dd>last until revoked/);

      const off = await cliInProcess(t.env, ['--json', 'app', 'edit', rotatingWeb.client_id, '--no-rotate-refresh-tokens']);
      assert.equal(off.rotate_refresh_tokens, false);
      const on = await cliInProcess(t.env, ['--json', 'app', 'edit', rotatingWeb.client_id, '--rotate-refresh-tokens']);
      assert.equal(on.rotate_refresh_tokens, true);
      const both = await runCli(t.env, ['app', 'edit', rotatingWeb.client_id, '--rotate-refresh-tokens', '--no-rotate-refresh-tokens']);
      assert.equal(both.code, 2, both.stderr);
      assert.match(both.stderr, /contradict/);
    });
  });

  describe('the application form', () => {
    it('registers with the rotation box ticked, shows it ticked on the edit form, and an edit without it turns rotation off', async () => {
      const url = `${s.base}/account/applications/register`;
      const form = await alice.fetch(url);
      assert.match(form.body, /<label class="check"><input type="checkbox" name="rotate_refresh" value="on">Rotate refresh tokens/);
      const done = await alice.fetch(url, { form: { csrf_token: Browser.csrf(form), name: 'Form Rotating', kind: 'public', redirect_uri: '', id_token_alg: 'RS256', rotate_refresh: 'on' } });
      assert.equal(done.status, 303, done.body.slice(0, 300));
      const listed = await cliInProcess(t.env, ['--json', 'app', 'list']);
      const app = listed.applications.find((a: { name: string }) => a.name === 'Form Rotating');
      assert.equal(app.rotate_refresh_tokens, true);

      const page = await alice.fetch(`${s.base}/account/applications`);
      const id = new RegExp(`Form Rotating</h3>[\\s\\S]*?/account/applications/edit/(\\d+)`).exec(page.body)?.[1];
      assert.ok(id, 'an edit link');
      const edit = await alice.fetch(`${s.base}/account/applications/edit/${id}`);
      assert.match(edit.body, /name="rotate_refresh" value="on" checked>/);
      const saved = await alice.fetch(`${s.base}/account/applications/edit/${id}`, { form: { csrf_token: Browser.csrf(edit), name: 'Form Rotating', redirect_uri: '', id_token_alg: 'RS256' } });
      assert.equal(saved.status, 303, saved.body.slice(0, 300));
      const later = await cliInProcess(t.env, ['--json', 'app', 'list']);
      assert.equal(later.applications.find((a: { name: string }) => a.name === 'Form Rotating').rotate_refresh_tokens, undefined);
    });
  });

  describe('with openid-client', () => {
    it('without rotation the refresh token stays (the interface), and keeps working', async () => {
      const web = await addApp(t, 'alice', 'confidential', WEB_URI, 'Classic Web');
      const { config, tokens } = await openidTokens(web);
      const first = await client.refreshTokenGrant(config, tokens.refresh_token as string);
      assert.equal(first.refresh_token, tokens.refresh_token);
      const second = await client.refreshTokenGrant(config, tokens.refresh_token as string);
      assert.equal(second.refresh_token, tokens.refresh_token);
      assert.notEqual(second.access_token, first.access_token);
      assert.equal(await userinfoStatus(s.base, second.access_token), 200);
    });

    it('with rotation each refresh gives a new refresh token, which works; the old one past the window ends the grant', async () => {
      const { config, tokens } = await openidTokens(rotatingWeb);
      const first = await client.refreshTokenGrant(config, tokens.refresh_token as string);
      assert.ok(first.refresh_token !== undefined && first.refresh_token !== tokens.refresh_token, 'a new refresh token');
      assert.equal(await userinfoStatus(s.base, first.access_token), 200);
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 401, 'the access token before the refresh ended');
      const second = await client.refreshTokenGrant(config, first.refresh_token);
      assert.ok(second.refresh_token !== undefined && second.refresh_token !== first.refresh_token);
      assert.equal((await client.fetchUserInfo(config, second.access_token, client.skipSubjectCheck)).username, 'alice');

      clock.advance((GRACE_SECONDS + 1) * 1000);
      await assert.rejects(client.refreshTokenGrant(config, first.refresh_token), invalidGrant);
      assert.equal(await userinfoStatus(s.base, second.access_token), 401, 'reuse ended the grant: its access token stopped working');
      await assert.rejects(client.refreshTokenGrant(config, second.refresh_token as string), invalidGrant);
    });
  });

  describe('reuse detection and the grace window', () => {
    it('a used refresh token again within the window gets the same answer; after it, invalid_grant and the grant ends', async () => {
      const tokens = await desktopGrant(rotating);
      const a = await refresh(s.base, rotating, tokens.refresh_token as string);
      assert.equal(a.status, 200, a.body);
      const first = a.json();
      assert.notEqual(first.refresh_token, tokens.refresh_token);

      clock.advance((GRACE_SECONDS - 1) * 1000);
      const b = await refresh(s.base, rotating, tokens.refresh_token as string);
      assert.equal(b.status, 200, b.body);
      const again = b.json();
      assert.equal(again.refresh_token, first.refresh_token, 'the same new refresh token');
      assert.equal(again.access_token, first.access_token, 'the same access token');
      assert.equal(again.expires_in, first.expires_in - (GRACE_SECONDS - 1), 'with what is left of its life');
      assert.equal(await userinfoStatus(s.base, again.access_token), 200);
      assert.ok(await introspectActive(rotating, first.refresh_token));

      clock.advance(2000);
      assertOAuthError(await refresh(s.base, rotating, tokens.refresh_token as string), 400, 'invalid_grant', 'Invalid refresh token');
      assert.equal(await userinfoStatus(s.base, first.access_token), 401, 'the grant ended: its access token stopped working');
      assert.equal(await introspectActive(rotating, first.access_token), false);
      assert.equal(await introspectActive(rotating, first.refresh_token), false);
      assertOAuthError(await refresh(s.base, rotating, first.refresh_token), 400, 'invalid_grant');
    });

    it('a refresh token two rotations old ends the grant at once, even within the window', async () => {
      const tokens = await desktopGrant(rotating);
      const first = (await refresh(s.base, rotating, tokens.refresh_token as string)).json();
      const second = (await refresh(s.base, rotating, first.refresh_token)).json();
      assert.equal(await userinfoStatus(s.base, second.access_token), 200);
      assertOAuthError(await refresh(s.base, rotating, tokens.refresh_token as string), 400, 'invalid_grant');
      assert.equal(await userinfoStatus(s.base, second.access_token), 401);
      assertOAuthError(await refresh(s.base, rotating, second.refresh_token), 400, 'invalid_grant');
    });

    it('a made-up refresh token of a live grant is refused without ending it', async () => {
      const tokens = await desktopGrant(rotating);
      const forged = `${(tokens.refresh_token as string).split('.')[0]}.${'A'.repeat(43)}`;
      assertOAuthError(await refresh(s.base, rotating, forged), 400, 'invalid_grant');
      const ok = await refresh(s.base, rotating, tokens.refresh_token as string);
      assert.equal(ok.status, 200, ok.body);
    });

    it('ten concurrent refreshes with one token all get the same answer', async () => {
      const tokens = await desktopGrant(rotating);
      const all = await Promise.all(Array.from({ length: 10 }, () => refresh(s.base, rotating, tokens.refresh_token as string)));
      for (const r of all) assert.equal(r.status, 200, r.body);
      const bodies = all.map((r) => r.json());
      assert.equal(new Set(bodies.map((b) => b.refresh_token)).size, 1, 'one refresh token');
      assert.equal(new Set(bodies.map((b) => b.access_token)).size, 1, 'one access token');
      assert.notEqual(bodies[0].refresh_token, tokens.refresh_token);
      assert.equal(await userinfoStatus(s.base, bodies[0].access_token), 200);
      const next = await refresh(s.base, rotating, bodies[0].refresh_token);
      assert.equal(next.status, 200, next.body);
    });

    it('two refreshes sent at once with one token get the same pair, which works', async () => {
      const tokens = await desktopGrant(rotating);
      const [a, b] = await Promise.all([refresh(s.base, rotating, tokens.refresh_token as string), refresh(s.base, rotating, tokens.refresh_token as string)]);
      assert.equal(a.status, 200, a.body);
      assert.equal(b.status, 200, b.body);
      assert.equal(a.json().refresh_token, b.json().refresh_token);
      assert.equal(a.json().access_token, b.json().access_token);
      assert.equal(await userinfoStatus(s.base, a.json().access_token), 200);
    });

    it('a spent refresh token gives no way to any later token: the tokens are random, not computed from it', async () => {
      // The audit's reproduction (issue 32): rotation once made each pair HMAC-SHA256(previous refresh token, purpose).
      const formerly = (tok: string, purpose: 'refresh' | 'access') =>
        `${tok.split('.')[0]}.${createHmac('sha256', tok).update(`sleeve refresh token rotation: ${purpose}`).digest('base64url')}`;
      const tokens = await desktopGrant(rotating);
      const spent = tokens.refresh_token as string;
      const first = (await refresh(s.base, rotating, spent)).json();
      const second = (await refresh(s.base, rotating, first.refresh_token)).json();
      assert.equal(await userinfoStatus(s.base, second.access_token), 200);
      // What the holder of the spent token computes offline, without presenting it.
      const guessed = { refresh: formerly(spent, 'refresh'), access: formerly(spent, 'access') };
      const guessedNext = { refresh: formerly(guessed.refresh, 'refresh'), access: formerly(guessed.refresh, 'access') };
      assert.notEqual(guessed.refresh, first.refresh_token);
      assert.notEqual(guessed.access, first.access_token);
      assert.notEqual(guessedNext.refresh, second.refresh_token);
      assert.notEqual(guessedNext.access, second.access_token);
      assert.equal(await userinfoStatus(s.base, guessedNext.access), 401, 'the computed access token is refused');
      assertOAuthError(await refresh(s.base, rotating, guessedNext.refresh), 400, 'invalid_grant');
      // A made-up token is not reuse of a real one: the grant goes on.
      assert.equal(await userinfoStatus(s.base, second.access_token), 200);
    });

    it('the database keeps no usable token: only hashes, and the pair for the grace window sealed', async () => {
      const tokens = await desktopGrant(rotating);
      const first = (await refresh(s.base, rotating, tokens.refresh_token as string)).json();
      const rows = await dumpAuthTables(t);
      const stored = JSON.stringify(rows);
      for (const tok of [tokens.refresh_token as string, first.refresh_token, first.access_token]) {
        assert.ok(!stored.includes(tok.split('.')[1] as string), 'no token in the database');
      }
      const used = (rows[1] as { successor_sealed: string | null }[]).filter((r) => r.successor_sealed !== null);
      assert.ok(used.length >= 1, 'the pair is kept sealed for the grace window');
      // The next rotation of the grant clears it: that pair is no longer current.
      assert.equal((await refresh(s.base, rotating, first.refresh_token)).status, 200);
      const later = (await dumpAuthTables(t))[1] as { successor_sealed: string | null; token_hash: string }[];
      assert.equal(later.filter((r) => r.successor_sealed !== null).length, used.length, 'one sealed pair per rotating grant: the newest');
    });

    it('an application without rotation keeps its refresh token, used any number of times', async () => {
      const tokens = await desktopGrant(plain);
      for (let i = 0; i < 3; i++) {
        const r = await refresh(s.base, plain, tokens.refresh_token as string);
        assert.equal(r.status, 200, r.body);
        assert.equal(r.json().refresh_token, tokens.refresh_token);
        clock.advance((GRACE_SECONDS + 1) * 1000);
      }
    });
  });

  describe('the audit trail', () => {
    it('reuse writes a grant.revoked line with reason refresh_reused', async () => {
      const logged = await startLoggedAuthServer({ ...t, env: { ...t.env } }, { SLEEVE_LOG_LEVEL: 'info', SLEEVE_REFRESH_GRACE_SECONDS: '0' }, clock);
      try {
        const b = await signIn(logged.base, 'alice');
        const tokens = await grant(b, logged.base, rotating, { redirect_uri: OOB, scope: 'profile' });
        assert.equal((await refresh(logged.base, rotating, tokens.refresh_token as string)).status, 200);
        clock.advance(1);
        assertOAuthError(await refresh(logged.base, rotating, tokens.refresh_token as string), 400, 'invalid_grant');
        const lines = logged
          .logs()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as Record<string, unknown>);
        const line = lines.find((l) => l.audit === 'grant.revoked' && l.reason === 'refresh_reused');
        assert.ok(line, 'an audit line');
        assert.equal(line.user, 'alice');
        assert.equal(line.clientId, rotating.client_id);
        assert.equal(line.via, 'oauth2/token');
        assert.ok(!logged.logs().includes(tokens.refresh_token as string), 'no token in the log');
      } finally {
        await logged.server.close();
      }
    });
  });

  describe('a database that is busy or away', () => {
    it('answers 503 temporarily_unavailable with Retry-After, never 400; the refresh token still works after', async () => {
      const tokens = await desktopGrant(rotating);
      const pending = holdWriteLock(t);
      const res = await pending.during(() => refresh(s.base, rotating, tokens.refresh_token as string));
      assertOAuthError(res, 503, 'temporarily_unavailable');
      assert.equal(res.headers['retry-after'], '1');
      const ok = await refresh(s.base, rotating, tokens.refresh_token as string);
      assert.equal(ok.status, 200, ok.body);
    });
  });
});

/** The rows of the grant and used-refresh-token tables, as read by anyone with the database. */
async function dumpAuthTables(t: TestEnv): Promise<unknown[]> {
  const tables = ['oauth_grant', 'oauth_refresh_used'];
  if (DIALECT === 'sqlite') {
    const db = new Database(path.join(t.env.SLEEVE_DATA_DIR as string, 'sleeve.db'), { readonly: true });
    try {
      return tables.map((name) => db.prepare(`SELECT * FROM ${name}`).all());
    } finally {
      db.close();
    }
  }
  const c = new pg.Client({ connectionString: t.env.SLEEVE_DATABASE_URL });
  await c.connect();
  try {
    return await Promise.all(tables.map(async (name) => (await c.query(`SELECT * FROM ${name}`)).rows));
  } finally {
    await c.end();
  }
}

/**
 * Makes the database fail a refresh the way a busy or vanishing database does. SQLite: another
 * connection holds the write lock, so sleeve's write waits out its busy timeout and gets
 * SQLITE_BUSY. PostgreSQL: another session holds a lock on the table, and sleeve's session,
 * waiting on it, is terminated by the server (as on a restart or failover).
 */
function holdWriteLock(t: TestEnv): { during(run: () => Promise<HttpsResponse>): Promise<HttpsResponse> } {
  return {
    async during(run) {
      if (DIALECT === 'sqlite') {
        const db = new Database(path.join(t.env.SLEEVE_DATA_DIR as string, 'sleeve.db'));
        db.exec('BEGIN IMMEDIATE');
        try {
          return await run();
        } finally {
          db.exec('ROLLBACK');
          db.close();
        }
      }
      const locker = new pg.Client({ connectionString: t.env.SLEEVE_DATABASE_URL });
      const admin = new pg.Client({ connectionString: t.env.SLEEVE_DATABASE_URL });
      await Promise.all([locker.connect(), admin.connect()]);
      try {
        await locker.query('BEGIN');
        await locker.query('LOCK TABLE oauth_refresh_used IN ACCESS EXCLUSIVE MODE');
        const answer = run();
        // The session that waits on the lock, once it waits: ended by the server.
        const lockerPid = (locker as unknown as { processID: number }).processID;
        const waiting = () =>
          admin.query("SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1", [lockerPid]);
        await pollUntil(waiting, (r) => r.rows.length > 0, 10_000, 20);
        return await answer;
      } finally {
        await locker.query('ROLLBACK');
        await Promise.all([locker.end(), admin.end()]);
      }
    },
  };
}
