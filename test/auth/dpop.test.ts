/*
 * DPoP (RFC 9449; docs/decisions.md, "DPoP"), driven by openid-client 6's own DPoP support
 * (getDPoPHandle) over default discovery for the code exchange, refresh and userinfo, and by
 * proofs made here with jose for every refusal: wrong htu and htm, a stale iat (the server's
 * clock moved), a replayed jti (also across two servers sharing Redis at 127.0.0.1:6379), a
 * refresh with another key, a missing ath, a bound token sent as Bearer, an application that
 * requires DPoP asked without a proof. Introspection shows cnf.jkt. Audit lines are checked.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import * as client from 'openid-client';
import { loadConfig } from '../../src/config/load.js';
import { serve, type Server } from '../../src/serve.js';
import { addApp, addUser, authorize, request, token, type HttpsResponse } from '../helpers/auth.js';
import { ShiftedClock } from '../helpers/clock.js';
import { cliInProcess, DIALECT, freePort, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { assertOAuthError, codeOf, fetchTrustingDataDir, signIn, type Client } from './support.js';

const LOOPBACK = 'http://127.0.0.1:8765/callback';
const REDIS_URL = 'redis://127.0.0.1:6379';

interface Logged {
  server: Server;
  base: string;
  logs(): string;
}

/**
 * An auth server on the test's database, its clock given, its log kept, sharing Redis at
 * 127.0.0.1:6379; its public URL its own address unless given (processes behind one name share it).
 */
async function startServer(
  t: TestEnv,
  clock: ShiftedClock,
  publicUrl?: string,
  opts: { redis?: boolean; dpopReplayLimits?: { max: number; perClient: number } } = {},
): Promise<Logged> {
  const port = await freePort();
  const base = `https://127.0.0.1:${port}`;
  const env: Record<string, string> = { ...t.env, SLEEVE_AUTH_LISTEN: `127.0.0.1:${port}`, SLEEVE_AUTH_URL: publicUrl ?? base, SLEEVE_LOG_LEVEL: 'info' };
  if (opts.redis !== false) env.SLEEVE_REDIS_URL = REDIS_URL;
  const chunks: Buffer[] = [];
  const stream = new PassThrough();
  stream.on('data', (c: Buffer) => chunks.push(c));
  const server = await serve(loadConfig(env), { only: 'auth', logStream: stream, clock, ...(opts.dpopReplayLimits === undefined ? {} : { dpopReplayLimits: opts.dpopReplayLimits }) });
  return { server, base, logs: () => Buffer.concat(chunks).toString('utf8') };
}

/** A key pair for proofs made here. */
async function proofKey(): Promise<{ privateKey: CryptoKey; jwk: JWK; jkt: string }> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = await exportJWK(publicKey);
  return { privateKey: privateKey as CryptoKey, jwk, jkt: await calculateJwkThumbprint(jwk) };
}

interface ProofClaims {
  htm: string;
  htu: string;
  iat?: number;
  jti?: string;
  ath?: string;
}

/** A DPoP proof signed with `key`; `header` overrides the protected header. */
async function makeProof(key: { privateKey: CryptoKey; jwk: JWK }, claims: ProofClaims, header: Record<string, unknown> = {}): Promise<string> {
  const payload = { jti: randomUUID(), iat: Math.floor(Date.now() / 1000), ...claims };
  return new SignJWT(payload).setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: key.jwk, ...header }).sign(key.privateKey);
}

/** Where a remembered proof's jti is kept in Redis: per client (auth/dpop.ts). */
const replayKey = (clientId: string, jkt: string, jti: string) => `sleeve:dpop:${createHash('sha256').update(`${clientId}\n${jkt}\n${jti}`).digest('base64url')}`;

const ath = (accessToken: string) => createHash('sha256').update(accessToken).digest('base64url');

describe(`DPoP (${DIALECT})`, () => {
  let t: TestEnv;
  /** Real time (proofs, here and openid-client's, carry the real iat) that a test can move. */
  let clock: ShiftedClock;
  let s: Logged;
  let publicApp: Client;
  let confidentialApp: Client;
  let customFetch: client.CustomFetch;
  let redis: Redis;

  before(async () => {
    t = await makeTestEnv();
    clock = new ShiftedClock();
    s = await startServer(t, clock);
    customFetch = fetchTrustingDataDir(t.env.SLEEVE_DATA_DIR);
    await addUser(t, 'alice');
    publicApp = await addApp(t, 'alice', 'public', undefined, 'Tagger');
    confidentialApp = await addApp(t, 'alice', 'confidential', 'https://client.example/cb', 'Web');
    redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
  });

  after(async () => {
    redis?.disconnect();
    await s?.server.close();
    await t?.cleanup();
  });

  const discover = (app: Client) => client.discovery(new URL(s.base), app.client_id, app.client_secret, undefined, { [client.customFetch]: customFetch });

  /** A code for the public application (sign-in and consent done over HTTPS); PKCE S256. */
  async function codeFor(app: Client, scope: string, verifier: string, redirectUri = LOOPBACK): Promise<string> {
    const alice = await signIn(s.base, 'alice');
    const res = await authorize(alice, s.base, {
      client_id: app.client_id,
      redirect_uri: redirectUri,
      response_type: 'code',
      scope,
      access_type: 'offline',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    return codeOf(res);
  }

  /** openid-client's code exchange with its DPoP handle; the tokens and the key's thumbprint. */
  async function boundTokens(app: Client = publicApp) {
    const config = await discover(app);
    const keyPair = await client.randomDPoPKeyPair('ES256');
    const DPoP = client.getDPoPHandle(config, keyPair);
    const verifier = client.randomPKCECodeVerifier();
    const code = await codeFor(app, 'openid profile', verifier);
    const tokens = await client.authorizationCodeGrant(config, new URL(`${LOOPBACK}?${new URLSearchParams({ code, iss: s.base })}`), { pkceCodeVerifier: verifier }, undefined, { DPoP });
    const jkt = await calculateJwkThumbprint(await exportJWK(keyPair.publicKey));
    return { config, keyPair, DPoP, tokens, jkt, key: { privateKey: keyPair.privateKey, jwk: await exportJWK(keyPair.publicKey) } };
  }

  const introspect = (app: Client, tok: string) => request(`${s.base}/oauth2/introspect`, { form: { token: tok, client_id: app.client_id, client_secret: app.client_secret } });
  const refreshWith = (tok: string, headers: Record<string, string> = {}, app: Client = publicApp) =>
    token(s.base, { grant_type: 'refresh_token', refresh_token: tok, client_id: app.client_id, client_secret: app.client_secret }, headers);
  const userinfo = (headers: Record<string, string>) => request(`${s.base}/oauth2/userinfo`, { headers });
  const auditLines = (event: string) =>
    s
      .logs()
      .split('\n')
      .filter((l) => l.includes(`"audit":"${event}"`))
      .map((l) => JSON.parse(l) as { reason?: string; clientId?: string });

  it('metadata: both documents advertise dpop_signing_alg_values_supported', async () => {
    for (const doc of ['openid-configuration', 'oauth-authorization-server']) {
      const m = (await request(`${s.base}/.well-known/${doc}`)).json();
      assert.deepEqual(m.dpop_signing_alg_values_supported, ['ES256', 'ES384', 'RS256', 'PS256', 'EdDSA']);
    }
  });

  it('openid-client with getDPoPHandle: code exchange, userinfo, refresh; tokens bound to its key; introspection shows cnf.jkt', async () => {
    const { config, DPoP, tokens, jkt } = await boundTokens();
    assert.equal(tokens.token_type, 'dpop');
    assert.equal(tokens.claims()?.sub, 'alice');
    const info = await client.fetchUserInfo(config, tokens.access_token, 'alice', { DPoP });
    assert.equal(info.preferred_username, 'alice');

    const seen = (await introspect(publicApp, tokens.access_token)).json();
    assert.equal(seen.active, true);
    assert.equal(seen.token_type, 'DPoP');
    assert.deepEqual(seen.cnf, { jkt });
    const refreshSeen = (await introspect(publicApp, tokens.refresh_token as string)).json();
    assert.deepEqual(refreshSeen.cnf, { jkt }, 'a public client’s refresh token is bound to the key too');

    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token as string, undefined, { DPoP });
    assert.equal(refreshed.token_type, 'dpop');
    assert.notEqual(refreshed.access_token, tokens.access_token);
    assert.equal((await client.fetchUserInfo(config, refreshed.access_token, 'alice', { DPoP })).sub, 'alice');
    assert.deepEqual((await introspect(publicApp, refreshed.access_token)).json().cnf, { jkt });
  });

  it('a bound access token presented as Bearer is refused: 401 invalid_token with a DPoP challenge', async () => {
    const { tokens } = await boundTokens();
    const res = await userinfo({ authorization: `Bearer ${tokens.access_token}` });
    assertOAuthError(res, 401, 'invalid_token', /DPoP-bound/);
    assert.match(String(res.headers['www-authenticate']), /^DPoP algs="ES256 [^"]*", error="invalid_token"/);
    assert.ok(auditLines('dpop.rejected').some((l) => l.reason === 'bound_token_as_bearer' && l.clientId === publicApp.client_id));
  });

  it('userinfo: a proof without ath, with another token’s ath, or of another key is refused (401 invalid_dpop_proof)', async () => {
    const { tokens, key } = await boundTokens();
    const htu = `${s.base}/oauth2/userinfo`;
    const auth = { authorization: `DPoP ${tokens.access_token}` };
    const noAth = await userinfo({ ...auth, dpop: await makeProof(key, { htm: 'GET', htu }) });
    assertOAuthError(noAth, 401, 'invalid_dpop_proof', /ath/);
    assert.match(String(noAth.headers['www-authenticate']), /^DPoP algs="[^"]+", error="invalid_dpop_proof"/);
    assertOAuthError(await userinfo({ ...auth, dpop: await makeProof(key, { htm: 'GET', htu, ath: ath('another') }) }), 401, 'invalid_dpop_proof', /ath/);
    const other = await proofKey();
    assertOAuthError(await userinfo({ ...auth, dpop: await makeProof(other, { htm: 'GET', htu, ath: ath(tokens.access_token) }) }), 401, 'invalid_dpop_proof', /another key/);
    assertOAuthError(await userinfo(auth), 401, 'invalid_dpop_proof', /required/);
    const ok = await userinfo({ ...auth, dpop: await makeProof(key, { htm: 'GET', htu, ath: ath(tokens.access_token) }) });
    assert.equal(ok.status, 200, ok.body);
    assert.ok(auditLines('dpop.rejected').some((l) => l.reason === 'ath'));
  });

  it('token endpoint: wrong htu, wrong htm, stale iat (the server clock moved), a bad header are refused with 400 invalid_dpop_proof; htu is compared normalized, without query', async () => {
    const { tokens } = await boundTokens();
    const rt = tokens.refresh_token as string;
    const key = await proofKey();
    const htu = `${s.base}/oauth2/token`;
    assertOAuthError(await refreshWith(rt, { dpop: await makeProof(key, { htm: 'POST', htu: `${s.base}/oauth2/revoke` }) }), 400, 'invalid_dpop_proof', /htu/);
    assertOAuthError(await refreshWith(rt, { dpop: await makeProof(key, { htm: 'POST', htu: 'https://elsewhere.example/oauth2/token' }) }), 400, 'invalid_dpop_proof', /htu/);
    assertOAuthError(await refreshWith(rt, { dpop: await makeProof(key, { htm: 'GET', htu }) }), 400, 'invalid_dpop_proof', /htm/);
    clock.advance(120_000);
    try {
      assertOAuthError(await refreshWith(rt, { dpop: await makeProof(key, { htm: 'POST', htu }) }), 400, 'invalid_dpop_proof', /iat/);
    } finally {
      clock.advance(-120_000);
    }
    assertOAuthError(await refreshWith(rt, { dpop: await makeProof(key, { htm: 'POST', htu }, { typ: 'JWT' }) }), 400, 'invalid_dpop_proof', /typ/);
    assertOAuthError(await refreshWith(rt, { dpop: await makeProof(key, { htm: 'POST', htu }, { jwk: { ...key.jwk, d: 'AAAA' } }) }), 400, 'invalid_dpop_proof', /private/);
    const forged = await makeProof(key, { htm: 'POST', htu });
    const [h, p] = forged.split('.');
    const otherSig = (await makeProof(key, { htm: 'POST', htu: `${htu}x` })).split('.')[2];
    assertOAuthError(await refreshWith(rt, { dpop: `${h}.${p}.${otherSig}` }), 400, 'invalid_dpop_proof', /signature/);
    assertOAuthError(await refreshWith(rt, { dpop: 'not a jwt' }), 400, 'invalid_dpop_proof');
    const upper = `${s.base.replace('https://', 'HTTPS://')}/oauth2/token?ignored=1`;
    const reasons = new Set(auditLines('dpop.rejected').map((l) => l.reason));
    for (const r of ['htu', 'htm', 'iat', 'typ', 'private_key', 'signature', 'malformed']) assert.ok(reasons.has(r), `an audit line for ${r}`);
    // Normalized comparison: scheme case and a query string do not matter.
    const fresh = await boundTokens();
    const res = await refreshWith(fresh.tokens.refresh_token as string, { dpop: await makeProof(fresh.key, { htm: 'POST', htu: upper }) });
    assert.equal(res.status, 200, res.body);
    assert.equal(res.json().token_type, 'DPoP');
  });

  it('refresh of a bound refresh token: another key or no proof is invalid_grant, and changes nothing', async () => {
    const { tokens, key, jkt } = await boundTokens();
    const rt = tokens.refresh_token as string;
    const htu = `${s.base}/oauth2/token`;
    const other = await proofKey();
    assertOAuthError(await refreshWith(rt, { dpop: await makeProof(other, { htm: 'POST', htu }) }), 400, 'invalid_grant', /another DPoP key/);
    assertOAuthError(await refreshWith(rt), 400, 'invalid_grant', /DPoP-bound/);
    const reasons = auditLines('dpop.rejected').map((l) => l.reason);
    assert.ok(reasons.includes('wrong_key') && reasons.includes('no_proof'));
    // The access token issued before still works, with its key.
    const info = await userinfo({ authorization: `DPoP ${tokens.access_token}`, dpop: await makeProof(key, { htm: 'GET', htu: `${s.base}/oauth2/userinfo`, ath: ath(tokens.access_token) }) });
    assert.equal(info.status, 200, info.body);
    const ok = await refreshWith(rt, { dpop: await makeProof(key, { htm: 'POST', htu }) });
    assert.equal(ok.status, 200, ok.body);
    assert.deepEqual((await introspect(publicApp, ok.json().access_token)).json().cnf, { jkt });
  });

  it('a replayed proof (same jti) is refused, at the token endpoint and at userinfo; audited as dpop.replayed', async () => {
    const { tokens, key } = await boundTokens();
    const proof = await makeProof(key, { htm: 'GET', htu: `${s.base}/oauth2/userinfo`, ath: ath(tokens.access_token) });
    const auth = { authorization: `DPoP ${tokens.access_token}`, dpop: proof };
    assert.equal((await userinfo(auth)).status, 200);
    assertOAuthError(await userinfo(auth), 401, 'invalid_dpop_proof', /used before/);
    const tokenProof = await makeProof(key, { htm: 'POST', htu: `${s.base}/oauth2/token` });
    assert.equal((await refreshWith(tokens.refresh_token as string, { dpop: tokenProof })).status, 200);
    assertOAuthError(await refreshWith(tokens.refresh_token as string, { dpop: tokenProof }), 400, 'invalid_dpop_proof', /used before/);
    assert.ok(auditLines('dpop.replayed').length >= 2);
  });

  it('a proof replayed against a second server sharing Redis is refused there', async () => {
    // A second process behind the same public URL (its own port), as behind a load balancer.
    const sibling = await startServer(t, clock, s.base);
    try {
      const { tokens, key, jkt } = await boundTokens();
      const auth = { authorization: `DPoP ${tokens.access_token}` };
      const proofFor = async () => {
        const jti = randomUUID();
        return { jti, proof: await makeProof(key, { htm: 'GET', htu: `${s.base}/oauth2/userinfo`, ath: ath(tokens.access_token), jti }) };
      };
      // Each server's Redis connection comes up in the background: wait until its proofs are recorded there.
      const stored = async (jti: string) => (await redis.exists(replayKey(publicApp.client_id, jkt, jti))) === 1;
      for (const server of [s, sibling]) {
        for (let i = 0; ; i++) {
          const { jti, proof } = await proofFor();
          const res = await request(`${server.base}/oauth2/userinfo`, { headers: { ...auth, dpop: proof } });
          assert.equal(res.status, 200, res.body);
          if (await stored(jti)) break;
          assert.ok(i < 100, `${server.base} never used Redis`);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      for (const [first, second] of [
        [s, sibling],
        [sibling, s],
      ] as const) {
        const { proof } = await proofFor();
        const used = await request(`${first.base}/oauth2/userinfo`, { headers: { ...auth, dpop: proof } });
        assert.equal(used.status, 200, used.body);
        assertOAuthError(await request(`${second.base}/oauth2/userinfo`, { headers: { ...auth, dpop: proof } }), 401, 'invalid_dpop_proof', /used before/);
        assert.ok(second.logs().includes('"audit":"dpop.replayed"'), 'the second server logs the replay');
      }
    } finally {
      await sibling.server.close();
    }
  });

  it('an application that requires DPoP: a token request without a proof is invalid_request; with one it works', async () => {
    const edited = await cliInProcess(t.env, ['--json', 'app', 'edit', confidentialApp.client_id, '--require-dpop']);
    assert.equal(edited.require_dpop, true);
    const verifier = client.randomPKCECodeVerifier();
    const code = await codeFor(confidentialApp, 'profile', verifier, 'https://client.example/cb');
    const form = { grant_type: 'authorization_code', code, redirect_uri: 'https://client.example/cb', client_id: confidentialApp.client_id, client_secret: confidentialApp.client_secret, code_verifier: verifier };
    assertOAuthError(await token(s.base, form), 400, 'invalid_request', /DPoP proof/);
    assert.ok(auditLines('dpop.rejected').some((l) => l.reason === 'required' && l.clientId === confidentialApp.client_id));
    const key = await proofKey();
    const ok: HttpsResponse = await token(s.base, form, { dpop: await makeProof(key, { htm: 'POST', htu: `${s.base}/oauth2/token` }) });
    assert.equal(ok.status, 200, ok.body);
    assert.equal(ok.json().token_type, 'DPoP');
    // A confidential client's refresh token is bound to its authentication, not to the key (RFC 9449 §5).
    assert.equal((await introspect(confidentialApp, ok.json().refresh_token)).json().cnf, undefined);
    assert.deepEqual((await introspect(confidentialApp, ok.json().access_token)).json().cnf, { jkt: key.jkt });
    assertOAuthError(await refreshWith(ok.json().refresh_token, {}, confidentialApp), 400, 'invalid_request', /DPoP proof/);
    const back = await cliInProcess(t.env, ['--json', 'app', 'edit', confidentialApp.client_id, '--no-require-dpop']);
    assert.equal(back.require_dpop, false);
    const bearer = await refreshWith(ok.json().refresh_token, {}, confidentialApp);
    assert.equal(bearer.status, 200, bearer.body);
    assert.equal(bearer.json().token_type, 'Bearer', 'without a proof, a confidential client gets a bearer token again');
  });
  describe('the replay store cannot be flushed (issue 32)', () => {
    /** A proof of `key` for userinfo with `accessToken`, its iat on the server's (moved) clock. */
    const userinfoProof = (key: { privateKey: CryptoKey; jwk: JWK }, base: string, accessToken: string, jti = randomUUID()) =>
      makeProof(key, { htm: 'GET', htu: `${base}/oauth2/userinfo`, ath: ath(accessToken), iat: Math.floor(clock.now() / 1000), jti });
    const userinfoAt = (base: string, accessToken: string, proof: string) => request(`${base}/oauth2/userinfo`, { headers: { authorization: `DPoP ${accessToken}`, dpop: proof } });

    it("an unauthenticated token request's proof is not remembered: anonymous requests cannot fill the store", async () => {
      const { tokens, key, jkt } = await boundTokens();
      const jti = randomUUID();
      const proof = await makeProof(key, { htm: 'POST', htu: `${s.base}/oauth2/token`, jti });
      // Anyone: a public client_id, a made-up code, a proof of their own.
      const anonymous = await token(s.base, { grant_type: 'authorization_code', code: 'made-up', redirect_uri: LOOPBACK, client_id: publicApp.client_id }, { dpop: proof });
      assertOAuthError(anonymous, 400, 'invalid_grant');
      assert.equal(await redis.exists(replayKey(publicApp.client_id, jkt, jti)), 0, 'not in Redis');
      // The same proof, in a request that authenticates, is its first use (and only then remembered).
      const ok = await refreshWith(tokens.refresh_token as string, { dpop: proof });
      assert.equal(ok.status, 200, ok.body);
      assertOAuthError(await refreshWith(ok.json().refresh_token, { dpop: proof }), 400, 'invalid_dpop_proof', /used before/);
    });

    for (const shared of [false, true]) {
      it(`a full store refuses new proofs (503, per client first) and never forgets one: ${shared ? 'two processes sharing Redis' : 'one process, in memory'}`, async () => {
        const limits = { max: 3, perClient: 2 };
        const first = await startServer(t, clock, s.base, { redis: shared, dpopReplayLimits: limits });
        const second = shared ? await startServer(t, clock, s.base, { redis: true, dpopReplayLimits: limits }) : undefined;
        try {
          const a = await boundTokens();
          const other = await addApp(t, 'alice', 'public', undefined, `Tagger ${shared ? 'shared' : 'alone'}`);
          const b = await boundTokens(other);
          if (second !== undefined) {
            // Each server's Redis connection comes up in the background: wait until both say so.
            const connected = async () => [first, second].every((x) => x.logs().includes('Redis connected (dpop)'));
            await pollUntil(connected, (up) => up, 10_000);
          }
          const captured = await userinfoProof(a.key, s.base, a.tokens.access_token);
          assert.equal((await userinfoAt(first.base, a.tokens.access_token, captured)).status, 200);
          assert.equal((await userinfoAt(first.base, a.tokens.access_token, await userinfoProof(a.key, s.base, a.tokens.access_token))).status, 200);
          const over = await userinfoAt(first.base, a.tokens.access_token, await userinfoProof(a.key, s.base, a.tokens.access_token));
          assertOAuthError(over, 503, 'temporarily_unavailable');
          assert.match(String(over.headers['retry-after']), /^\d+$/);
          assertOAuthError(await userinfoAt(first.base, a.tokens.access_token, captured), 401, 'invalid_dpop_proof', /used before/);
          // Another client is not refused because A is at its bound, until the whole store is full.
          assert.equal((await userinfoAt(first.base, b.tokens.access_token, await userinfoProof(b.key, s.base, b.tokens.access_token))).status, 200);
          assertOAuthError(await userinfoAt(first.base, b.tokens.access_token, await userinfoProof(b.key, s.base, b.tokens.access_token)), 503, 'temporarily_unavailable');
          // Full, it still remembers: the captured proof is refused here, and (through Redis) in the other process.
          assertOAuthError(await userinfoAt(first.base, a.tokens.access_token, captured), 401, 'invalid_dpop_proof', /used before/);
          if (second !== undefined) assertOAuthError(await userinfoAt(second.base, a.tokens.access_token, captured), 401, 'invalid_dpop_proof', /used before/);
          // Once the proofs could no longer pass the iat check, their room is free again.
          clock.advance(130_000);
          const later = await userinfoAt(first.base, a.tokens.access_token, await userinfoProof(a.key, s.base, a.tokens.access_token));
          assert.equal(later.status, 200, later.body);
        } finally {
          clock.advance(-130_000);
          await first.server.close();
          await second?.server.close();
        }
      });
    }
  });
});
