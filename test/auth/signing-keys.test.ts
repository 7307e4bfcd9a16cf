/*
 * The id_token signing keys (docs/oauth.md; docs/decisions.md,
 * "Signing keys"): made at the auth listener's first start, published at
 * /.well-known/jwks.json (public parts only), listed and rotated with `sleeve keys`; a
 * retired key stays in the JWKS until the tokens it signed have expired, so an id_token
 * signed with it verifies (jose's createRemoteJWKSet over HTTPS) until then. Time comes
 * from the server's injected clock; processes starting at once meet at a failpoint.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { calculateJwkThumbprint, createRemoteJWKSet, customFetch, decodeProtectedHeader, jwtVerify, type JWK } from 'jose';
import { signIdToken } from '../../src/auth/id-token.js';
import { MAX_SIGNED_LIFETIME_SECONDS, type SigningAlg } from '../../src/auth/signing-keys.js';
import { loadConfig } from '../../src/config/load.js';
import { serve, type Server } from '../../src/serve.js';
import { request } from '../helpers/auth.js';
import { CLI, cliInProcess, DIALECT, freePort, makeTestEnv, runCli, type TestEnv } from '../helpers/env.js';

const JWKS = '/.well-known/jwks.json';
/** When alice signed in (ms): auth_time is its whole seconds. */
const AUTH_TIME = Date.UTC(2026, 10, 24, 12, 0, 0, 750);
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

interface KeyRow {
  kid: string;
  alg: SigningAlg;
  state: 'active' | 'retired' | 'expired';
  created: string;
  retired: string | null;
  expires: string | null;
}

/** jose's remote JWK Set, fetched over HTTPS from the test server (self-signed certificate). */
function remoteJwks(base: string) {
  return createRemoteJWKSet(new URL(`${base}${JWKS}`), {
    [customFetch]: async (url: string) => {
      const res = await request(url);
      return new Response(res.body, { status: res.status, headers: { 'content-type': String(res.headers['content-type']) } });
    },
  });
}

describe(`signing keys and the JWKS (${DIALECT})`, () => {
  let t: TestEnv;
  let server: Server;
  let base: string;
  let offset = 0;
  const clock = { now: () => Date.now() + offset };
  const keysList = async (): Promise<KeyRow[]> => (await cliInProcess(t.env, ['--json', 'keys', 'list'])).keys;
  const jwks = async (): Promise<JWK[]> => {
    const res = await request(`${base}${JWKS}`);
    assert.equal(res.status, 200, res.body);
    return res.json().keys;
  };
  const sign = (alg: SigningAlg, extra: { nonce?: string; accessToken?: string } = {}) =>
    signIdToken(server.runtime.auth.signingKeys, { issuer: base, subject: 'alice', audience: 'client-1', authTime: AUTH_TIME, alg, now: clock.now(), ...extra });

  before(async () => {
    t = await makeTestEnv();
    const port = await freePort();
    base = `https://127.0.0.1:${port}`;
    Object.assign(t.env, { SLEEVE_AUTH_LISTEN: `127.0.0.1:${port}`, SLEEVE_AUTH_URL: base });
    server = await serve(loadConfig(t.env), { only: 'auth', clock, logStream: new PassThrough() });
  });

  after(async () => {
    await server?.close();
    await t?.cleanup();
  });

  it('makes one ES256 and one RS256 key at first start, and the JWKS serves their public parts only', async () => {
    const res = await request(`${base}${JWKS}`);
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.equal(res.headers['cache-control'], 'public, max-age=300');
    assert.equal(res.headers['access-control-allow-origin'], '*');
    const keys: JWK[] = res.json().keys;
    assert.deepEqual(keys.map((k) => k.alg).sort(), ['ES256', 'RS256']);
    for (const key of keys) {
      assert.equal(key.use, 'sig');
      for (const m of PRIVATE_MEMBERS) assert.equal(key[m as keyof JWK], undefined, `no private member ${m} in the ${key.alg} key`);
      const { kid, alg: _a, use: _u, ...bare } = key;
      assert.equal(kid, await calculateJwkThumbprint(bare, 'sha256'), 'kid is the RFC 7638 thumbprint');
      if (key.alg === 'ES256') assert.deepEqual([key.kty, key.crv, typeof key.x, typeof key.y], ['EC', 'P-256', 'string', 'string']);
      else assert.deepEqual([key.kty, key.e, Buffer.from(key.n as string, 'base64url').length], ['RSA', 'AQAB', 256]);
    }
    const listed = await keysList();
    assert.deepEqual(
      listed.map((k) => [k.alg, k.state, k.retired, k.expires]).sort(),
      [
        ['ES256', 'active', null, null],
        ['RS256', 'active', null, null],
      ],
    );
    assert.deepEqual(listed.map((k) => k.kid).sort(), keys.map((k) => k.kid).sort());
    const human = await runCli(t.env, ['keys', 'list']);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^KID +ALG +STATE +CREATED +RETIRED +EXPIRES\n/);
    for (const k of listed) assert.ok(human.stdout.includes(k.kid), `${k.kid} listed`);
    assert.ok(!/"d"|"p"|PRIVATE/i.test(human.stdout + human.stderr), 'no private key printed');
  });

  it('a second server on the same database makes no new keys', async () => {
    const before = (await keysList()).map((k) => k.kid).sort();
    const port = await freePort();
    const sibling = await serve(loadConfig({ ...t.env, SLEEVE_AUTH_LISTEN: `127.0.0.1:${port}` }), { only: 'auth', clock, logStream: new PassThrough() });
    try {
      assert.deepEqual((await keysList()).map((k) => k.kid).sort(), before);
    } finally {
      await sibling.close();
    }
  });

  for (const alg of ['ES256', 'RS256'] as const) {
    it(`signs an ${alg} id_token that jose verifies against the JWKS over HTTPS, with kid, nonce, auth_time and at_hash`, async () => {
      const accessToken = 'abc.0123456789-_access';
      const idToken = await sign(alg, { nonce: 'n-0S6_WzA2Mj', accessToken });
      const header = decodeProtectedHeader(idToken);
      const active = (await keysList()).find((k) => k.alg === alg && k.state === 'active');
      assert.deepEqual(header, { alg, kid: active?.kid, typ: 'JWT' });
      const { payload } = await jwtVerify(idToken, remoteJwks(base), { issuer: base, audience: 'client-1', algorithms: [alg], currentDate: new Date(clock.now()) });
      assert.equal(payload.sub, 'alice');
      assert.equal(payload.nonce, 'n-0S6_WzA2Mj');
      assert.equal(payload.exp, (payload.iat as number) + MAX_SIGNED_LIFETIME_SECONDS);
      assert.equal(payload.auth_time, Date.UTC(2026, 10, 24, 12, 0, 0) / 1000);
      const digest = createHash('sha256').update(accessToken).digest();
      assert.equal(payload.at_hash, digest.subarray(0, 16).toString('base64url'));
    });
  }

  it('refuses an id_token lifetime longer than a retired key stays published', async () => {
    await assert.rejects(
      signIdToken(server.runtime.auth.signingKeys, { issuer: base, subject: 'a', audience: 'c', authTime: clock.now(), alg: 'ES256', now: clock.now(), lifetimeSeconds: MAX_SIGNED_LIFETIME_SECONDS + 1 }),
      RangeError,
    );
  });

  it('keys rotate: the JWKS holds old and new keys; old tokens verify until the old keys expire, then the old keys leave', async () => {
    const old = await keysList();
    const oldTokens = { ES256: await sign('ES256', { nonce: 'old' }), RS256: await sign('RS256', { nonce: 'old' }) };
    const signedAt = clock.now();

    const rotated = await runCli(t.env, ['keys', 'rotate']);
    assert.equal(rotated.code, 0, rotated.stderr);
    const lines = rotated.stdout.trim().split('\n');
    assert.equal(lines.length, 2, rotated.stdout);
    const listed = await keysList();
    const fresh = listed.filter((k) => k.state === 'active');
    assert.deepEqual(fresh.map((k) => k.alg).sort(), ['ES256', 'RS256']);
    for (const k of fresh) {
      assert.ok(!old.some((o) => o.kid === k.kid), 'new kids');
      assert.ok(lines.includes(`new ${k.alg} key ${k.kid}`), `rotate printed the new ${k.alg} kid`);
    }
    const retired = listed.filter((k) => k.state === 'retired');
    assert.deepEqual(retired.map((k) => k.kid).sort(), old.map((k) => k.kid).sort());
    const expires = Date.parse(retired[0]?.expires as string);
    for (const k of retired) {
      // Published for the tokens' lifetime after retirement, plus the margin.
      assert.equal(Date.parse(k.expires as string) - Date.parse(k.retired as string), MAX_SIGNED_LIFETIME_SECONDS * 1000 + 5 * 60_000);
    }
    assert.deepEqual((await jwks()).map((k) => k.kid).sort(), [...old, ...fresh].map((k) => k.kid).sort());

    // A running server notices the rotation within a minute; then it signs with the new keys.
    offset += 61_000;
    for (const alg of ['ES256', 'RS256'] as const) {
      assert.equal(decodeProtectedHeader(await sign(alg)).kid, fresh.find((k) => k.alg === alg)?.kid);
    }

    // Just before the old keys expire, tokens they signed still verify against the JWKS.
    offset = expires - 1000 - Date.now();
    for (const alg of ['ES256', 'RS256'] as const) {
      const { payload } = await jwtVerify(oldTokens[alg], remoteJwks(base), { issuer: base, audience: 'client-1', currentDate: new Date(signedAt) });
      assert.equal(payload.nonce, 'old');
    }
    assert.equal((await jwks()).length, 4);

    // Once expired, the old keys leave the JWKS: their tokens no longer find a key.
    offset = expires + 1000 - Date.now();
    assert.deepEqual((await jwks()).map((k) => k.kid).sort(), fresh.map((k) => k.kid).sort());
    for (const alg of ['ES256', 'RS256'] as const) {
      await assert.rejects(jwtVerify(oldTokens[alg], remoteJwks(base), { currentDate: new Date(signedAt) }), { code: 'ERR_JWKS_NO_MATCHING_KEY' });
    }

    // The next start prunes them from the database.
    const port = await freePort();
    const sibling = await serve(loadConfig({ ...t.env, SLEEVE_AUTH_LISTEN: `127.0.0.1:${port}` }), { only: 'auth', clock, logStream: new PassThrough() });
    try {
      assert.deepEqual((await keysList()).map((k) => k.kid).sort(), fresh.map((k) => k.kid).sort());
    } finally {
      await sibling.close();
    }
  });
});

/** `sleeve serve --only auth` as a child process on a free port. */
async function spawnAuth(env: Record<string, string>): Promise<{ child: ChildProcess; stderr(): string; exited: Promise<unknown> }> {
  const port = await freePort();
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLEEVE_')));
  const child = spawn(process.execPath, [CLI, 'serve', '--only', 'auth'], {
    env: { ...clean, ...env, SLEEVE_AUTH_LISTEN: `127.0.0.1:${port}`, SLEEVE_AUTH_URL: `https://127.0.0.1:${port}` },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return { child, stderr: () => err, exited };
}

/**
 * Until `cond` holds. The bound only turns a hang into a failure: a process that ends fails the
 * wait at once (`saying` below), so it is long, for a start that makes an RSA key at a load
 * average of 30.
 */
async function waitFor(what: string, cond: () => boolean, said: () => string, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; ${said()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe(`signing keys made by processes starting at once (${DIALECT})`, () => {
  let t: TestEnv;
  const procs: Awaited<ReturnType<typeof spawnAuth>>[] = [];

  before(async () => {
    t = await makeTestEnv();
  });

  after(async () => {
    for (const p of procs) {
      if (p.child.exitCode === null) p.child.kill('SIGKILL');
      await p.exited;
    }
    await t?.cleanup();
  });

  it('two processes that both found no key and made one each leave one active key per algorithm', async () => {
    // Both stop after making their keys and before storing them, so both try to store them.
    const env = { ...t.env, SLEEVE_TEST_FAILPOINT: 'signing-keys-made' };
    procs.push(await spawnAuth(env), await spawnAuth(env));
    // What both processes said, for the message of any assertion below that fails.
    const said = () => procs.map((p, i) => `process ${i + 1} (exit ${p.child.exitCode ?? p.child.signalCode ?? 'none yet'}):\n${p.stderr()}`).join('\n');
    // A process that ended has nothing more to say: fail at once rather than at the timeout.
    const saying = (p: (typeof procs)[number], text: string) => () => {
      if (p.stderr().includes(text)) return true;
      if (p.child.exitCode !== null || p.child.signalCode !== null) throw new Error(`a process ended before saying ${text}; ${said()}`);
      return false;
    };
    for (const p of procs) await waitFor('the failpoint', saying(p, 'sleeve: failpoint signing-keys-made ES256,RS256'), said);
    for (const p of procs) p.child.kill('SIGUSR2');
    for (const p of procs) await waitFor('the start', saying(p, 'sleeve is running'), said);
    const keys: KeyRow[] = (await cliInProcess(t.env, ['--json', 'keys', 'list'])).keys;
    assert.deepEqual(
      keys.map((k) => [k.alg, k.state]).sort(),
      [
        ['ES256', 'active'],
        ['RS256', 'active'],
      ],
      said(),
    );
    for (const p of procs) p.child.kill('SIGTERM');
    for (const p of procs) assert.equal(await p.exited, 0, said());
  });
});
