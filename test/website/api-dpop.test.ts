/*
 * The write API with DPoP-bound access tokens (RFC 9449), as userinfo takes them: `Authorization:
 * DPoP` with a proof of the token's key for this method and URL (with `ath`), once; refusals
 * with the DPoP challenge and audit lines; and the audit lines of the changes made through it.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { loadConfig } from '../../src/config/load.js';
import { serve, type Server } from '../../src/serve.js';
import { addApp, addUser, authorize, token, type Browser } from '../helpers/auth.js';
import { cliInProcess, DIALECT, freePort, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { signIn } from '../auth/support.js';
import { call, multipart, REDIRECT_URI } from './support.js';

const RELEASE = '11111111-2222-4333-8444-555555555511';
const GROUP = '11111111-2222-4333-8444-5555555555b1';

interface Key {
  privateKey: CryptoKey;
  jwk: JWK;
  jkt: string;
}

async function proofKey(): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = await exportJWK(publicKey);
  return { privateKey: privateKey as CryptoKey, jwk, jkt: await calculateJwkThumbprint(jwk) };
}

function proof(key: Key, claims: { htm: string; htu: string; ath?: string }): Promise<string> {
  return new SignJWT({ jti: randomUUID(), iat: Math.floor(Date.now() / 1000), ...claims }).setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: key.jwk }).sign(key.privateKey);
}

const ath = (t: string) => createHash('sha256').update(t).digest('base64url');

describe(`the write API with DPoP-bound tokens (${DIALECT})`, () => {
  let t: TestEnv;
  let server: Server;
  let web: string;
  let logs: () => string;
  let alice: Browser;
  let app: { client_id: string; client_secret: string };
  let key: Key;
  let bound: string;
  let bearer: string;

  /** An access token with cover_art from the code flow; bound to `dpopKey` when given. */
  const accessToken = async (dpopKey?: Key): Promise<{ token: string; type: string }> => {
    const res = await authorize(alice, web, { client_id: app.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'cover_art' });
    assert.equal(res.status, 302, res.body.slice(0, 300));
    const code = new URL(String(res.headers.location)).searchParams.get('code') ?? '';
    const headers: Record<string, string> = dpopKey === undefined ? {} : { dpop: await proof(dpopKey, { htm: 'POST', htu: `${web}/oauth2/token` }) };
    const tok = await token(web, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: app.client_id, client_secret: app.client_secret }, headers);
    assert.equal(tok.status, 200, tok.body);
    return { token: tok.json().access_token, type: tok.json().token_type };
  };
  const images = `/api/cover-art/release/${RELEASE}/images`;
  const challengeOf = (res: { headers: Record<string, unknown> }) => String(res.headers['www-authenticate']);
  const errorOf = (res: { body: string }) => (JSON.parse(res.body) as { error: string }).error;
  const auditLines = (event: string) =>
    logs()
      .split('\n')
      .filter((l) => l.includes(`"audit":"${event}"`))
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  before(async () => {
    t = await makeTestEnv();
    const [webPort, artPort] = [await freePort(), await freePort()];
    web = `https://127.0.0.1:${webPort}`;
    Object.assign(t.env, { SLEEVE_AUTH_LISTEN: `127.0.0.1:${webPort}`, SLEEVE_AUTH_URL: web, SLEEVE_COVERART_LISTEN: `127.0.0.1:${artPort}`, SLEEVE_BASE_URL: `http://127.0.0.1:${artPort}` });
    await addUser(t, 'alice');
    app = await addApp(t, 'alice', 'confidential', REDIRECT_URI, 'Tagger');
    await cliInProcess(t.env, ['release', 'add', RELEASE, '--release-group', GROUP]);
    const chunks: Buffer[] = [];
    const stream = new PassThrough();
    stream.on('data', (c: Buffer) => chunks.push(c));
    server = await serve(loadConfig({ ...t.env, SLEEVE_LOG_LEVEL: 'info' }), { logStream: stream });
    logs = () => Buffer.concat(chunks).toString('utf8');
    alice = await signIn(web, 'alice');
    key = await proofKey();
    const b = await accessToken(key);
    assert.equal(b.type, 'DPoP');
    bound = b.token;
    bearer = (await accessToken()).token;
  });

  after(async () => {
    await server?.close();
    await t?.cleanup();
  });

  it('takes a bound token with a proof of its key for this request, once', async () => {
    const dpop = await proof(key, { htm: 'GET', htu: `${web}${images}`, ath: ath(bound) });
    const ok = await call(`${web}${images}`, { headers: { authorization: `DPoP ${bound}`, dpop } });
    assert.equal(ok.status, 200, ok.body);
    const again = await call(`${web}${images}`, { headers: { authorization: `DPoP ${bound}`, dpop } });
    assert.equal(again.status, 401);
    assert.equal(errorOf(again), 'invalid_dpop_proof');
    assert.match(challengeOf(again), /^DPoP algs="/);
    assert.equal(auditLines('dpop.replayed').length, 1);
    // A query string is not part of htu.
    const withQuery = await call(`${web}${images}?x=1`, { headers: { authorization: `DPoP ${bound}`, dpop: await proof(key, { htm: 'GET', htu: `${web}${images}`, ath: ath(bound) }) } });
    assert.equal(withQuery.status, 200, withQuery.body);
  });

  it('refuses a bound token as Bearer, without a proof, with a proof for another URL, method, token or key', async () => {
    const asBearer = await call(`${web}${images}`, { headers: { authorization: `Bearer ${bound}` } });
    assert.equal(asBearer.status, 401);
    assert.equal(errorOf(asBearer), 'invalid_token');
    assert.match(challengeOf(asBearer), /^DPoP /);
    assert.ok(auditLines('dpop.rejected').some((l) => l.reason === 'bound_token_as_bearer' && l.clientId === app.client_id));
    const refused = async (dpop: string | undefined, why: RegExp) => {
      const res = await call(`${web}${images}`, { headers: { authorization: `DPoP ${bound}`, ...(dpop === undefined ? {} : { dpop }) } });
      assert.equal(res.status, 401, res.body);
      assert.equal(errorOf(res), 'invalid_dpop_proof', res.body);
      assert.match(res.body, why);
    };
    await refused(undefined, /required/);
    await refused(await proof(key, { htm: 'GET', htu: `${web}/api/cover-art/release/${RELEASE}/order`, ath: ath(bound) }), /htu/);
    await refused(await proof(key, { htm: 'POST', htu: `${web}${images}`, ath: ath(bound) }), /htm/);
    await refused(await proof(key, { htm: 'GET', htu: `${web}${images}`, ath: ath('another token') }), /ath/);
    await refused(await proof(await proofKey(), { htm: 'GET', htu: `${web}${images}`, ath: ath(bound) }), /another key/);
  });

  it('refuses an unbound token sent as DPoP, and still takes it as Bearer', async () => {
    const dpop = await proof(key, { htm: 'GET', htu: `${web}${images}`, ath: ath(bearer) });
    const res = await call(`${web}${images}`, { headers: { authorization: `DPoP ${bearer}`, dpop } });
    assert.equal(res.status, 401);
    assert.equal(errorOf(res), 'invalid_token');
    assert.equal((await call(`${web}${images}`, { headers: { authorization: `Bearer ${bearer}` } })).status, 200);
  });

  it('changes cover art with a bound token, each change an audit line naming the editor and the application', async () => {
    const m = multipart([
      { name: 'types', value: 'Front' },
      { name: 'file', value: await makeJpeg(300, 300), filename: 'cover.jpg', type: 'image/jpeg' },
    ]);
    const dpop = await proof(key, { htm: 'POST', htu: `${web}${images}`, ath: ath(bound) });
    const added = await call(`${web}${images}`, { method: 'POST', headers: { authorization: `DPoP ${bound}`, dpop, 'content-type': m.type }, body: m.body });
    assert.equal(added.status, 201, added.body);
    const id = (added.json() as { id: string }).id;
    const edit = `${images}/${id}`;
    const patched = await call(`${web}${edit}`, { method: 'PATCH', json: { comment: 'from a tool' }, headers: { authorization: `DPoP ${bound}`, dpop: await proof(key, { htm: 'PATCH', htu: `${web}${edit}`, ath: ath(bound) }) } });
    assert.equal(patched.status, 200, patched.body);
    const [add] = auditLines('cover_art.added');
    assert.equal(add?.user, 'alice');
    assert.equal(add?.via, 'api');
    assert.equal(add?.clientId, app.client_id);
    assert.equal(add?.release, RELEASE);
    assert.equal(add?.image, id);
    assert.equal(typeof add?.address, 'string');
    const [edited] = auditLines('cover_art.edited');
    assert.equal(edited?.image, id);
    assert.ok(!logs().includes(bound), 'no token in the log');
  });
});
