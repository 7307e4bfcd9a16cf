/**
 * The peer of the auth benchmark: oidc-provider (the reference Node.js OAuth server)
 * with its default in-memory adapter, over HTTPS with the same certificate as sleeve,
 * one confidential client, and tokens minted through its own models. Prints
 * `listening https://… {tokens}` when ready. Used only by bench/auth.ts.
 * argv: certFile keyFile [full]
 *
 * `full` (bench/auth-oidc.ts): an RS256 signing key for id_tokens, DPoP on, a public client
 * with a DPoP-bound refresh token, and POST /bench/mint?n=N answering N fresh authorization
 * codes (openid profile, a nonce, PKCE S256). Its store is a plain Map, since the default
 * in-memory adapter keeps only the last 1000 entries and would forget the codes minted.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { createServer } from 'node:net';
import { exportJWK, generateKeyPair } from 'jose';
import Provider from 'oidc-provider';

const [certFile = '', keyFile = '', mode = ''] = process.argv.slice(2);
const full = mode === 'full';
const PUBLIC_ID = 'bench-public';
const ES_CLIENT_ID = 'bench-client-es256';
const REDIRECT = 'https://app.example/cb';

/** oidc-provider's adapter interface over a Map: nothing evicted (entries expire when read). */
const stores = new Map<string, Map<string, { payload: Record<string, unknown>; expiresAt: number }>>();
class MapAdapter {
  private readonly store: Map<string, { payload: Record<string, unknown>; expiresAt: number }>;
  constructor(name: string) {
    this.store = stores.get(name) ?? new Map();
    stores.set(name, this.store);
  }
  async upsert(id: string, payload: Record<string, unknown>, expiresIn: number) {
    this.store.set(id, { payload, expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : Infinity });
  }
  async find(id: string) {
    const e = this.store.get(id);
    if (e === undefined || e.expiresAt <= Date.now()) return undefined;
    return e.payload;
  }
  async findByUserCode(userCode: string) {
    for (const e of this.store.values()) if (e.payload.userCode === userCode) return e.payload;
    return undefined;
  }
  async findByUid(uid: string) {
    for (const e of this.store.values()) if (e.payload.uid === uid) return e.payload;
    return undefined;
  }
  async consume(id: string) {
    const e = this.store.get(id);
    if (e !== undefined) e.payload.consumed = Math.floor(Date.now() / 1000);
  }
  async destroy(id: string) {
    this.store.delete(id);
  }
  async revokeByGrantId(grantId: string) {
    for (const m of stores.values()) for (const [k, e] of m) if (e.payload.grantId === grantId) m.delete(k);
  }
}
const CLIENT_ID = 'bench-client';
const CLIENT_SECRET = 'bench-secret-bench-secret-bench-secret-0123';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a !== null ? a.port : 0));
    });
  });
}

const port = await freePort();
const issuer = `https://127.0.0.1:${port}`;
const provider = new Provider(issuer, {
  clients: [
    {
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      grant_types: ['authorization_code', 'refresh_token'],
      redirect_uris: ['https://app.example/cb'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_post',
    },
    ...(full
      ? [
          { client_id: PUBLIC_ID, grant_types: ['authorization_code', 'refresh_token'], redirect_uris: [REDIRECT], response_types: ['code'], token_endpoint_auth_method: 'none' },
          {
            client_id: ES_CLIENT_ID,
            client_secret: CLIENT_SECRET,
            grant_types: ['authorization_code'],
            redirect_uris: [REDIRECT],
            response_types: ['code'],
            token_endpoint_auth_method: 'client_secret_post',
            id_token_signed_response_alg: 'ES256',
          },
        ]
      : []),
  ],
  findAccount: async (_ctx: unknown, id: string) => ({
    accountId: id,
    claims: async () => ({ sub: id, profile: `${issuer}/user/${id}`, website: 'https://alice.example', zoneinfo: 'UTC', email: `${id}@example.com`, email_verified: true }),
  }),
  claims: { openid: ['sub'], profile: ['profile', 'website', 'zoneinfo'], email: ['email', 'email_verified'] },
  scopes: ['openid', 'offline_access', 'profile', 'email'],
  features: { devInteractions: { enabled: false }, ...(full ? { dPoP: { enabled: true } } : {}) },
  ...(full
    ? {
        adapter: MapAdapter,
        enabledJWA: { idTokenSigningAlgValues: ['RS256', 'ES256'] },
        jwks: {
          keys: [
            { ...(await exportJWK((await generateKeyPair('RS256', { extractable: true })).privateKey)), alg: 'RS256', use: 'sig', kid: 'bench-rs' },
            { ...(await exportJWK((await generateKeyPair('ES256', { extractable: true })).privateKey)), alg: 'ES256', use: 'sig', kid: 'bench-es' },
          ],
        },
      }
    : {}),
  cookies: { keys: ['bench-cookie-key-bench-cookie-key'] },
} as any);
provider.proxy = false;

const p = provider as any;
const client = await p.Client.find(CLIENT_ID);
const grant = new p.Grant({ accountId: 'alice', clientId: CLIENT_ID });
grant.addOIDCScope('openid offline_access profile email');
const grantId = await grant.save();
// userinfo needs openid; the refresh token leaves it out, so a refresh issues no ID token (the same work as sleeve's).
const accessToken = await new p.AccessToken({ accountId: 'alice', client, grantId, scope: 'openid profile email' }).save();
const refreshToken = await new p.RefreshToken({
  accountId: 'alice',
  client,
  grantId,
  scope: 'offline_access profile email',
  gty: 'authorization_code',
  authTime: Math.floor(Date.now() / 1000),
}).save();

/** Extra for `full`: the DPoP-bound refresh token of the public client. */
let extra: Record<string, string> = {};
const CODE_CHALLENGE = process.env.BENCH_CODE_CHALLENGE ?? '';
if (full) {
  const publicClient = await p.Client.find(PUBLIC_ID);
  const dpopGrant = new p.Grant({ accountId: 'alice', clientId: PUBLIC_ID });
  dpopGrant.addOIDCScope('openid offline_access profile email');
  const dpopGrantId = await dpopGrant.save();
  const boundRefresh = await new p.RefreshToken({
    accountId: 'alice',
    client: publicClient,
    grantId: dpopGrantId,
    scope: 'offline_access profile email',
    gty: 'authorization_code',
    authTime: Math.floor(Date.now() / 1000),
    jkt: process.env.BENCH_DPOP_JKT,
  }).save();
  extra = { dpopRefreshToken: boundRefresh, publicClientId: PUBLIC_ID, es256ClientId: ES_CLIENT_ID };
}

/** POST /bench/mint?n=N[&client=ID] (full only): N authorization codes for a confidential client, as its authorization endpoint would issue them. */
async function mint(n: number, clientId: string): Promise<string[]> {
  const codes: string[] = [];
  const forClient = await p.Client.find(clientId);
  // A grant of its own per batch: a code sent twice (a run past its lines' end) makes
  // oidc-provider revoke the code's grant, which would fail every later batch's codes too.
  const codeGrant = new p.Grant({ accountId: 'alice', clientId });
  codeGrant.addOIDCScope('openid profile');
  const grantId: string = await codeGrant.save();
  for (let i = 0; i < n; i++) {
    const code = new p.AuthorizationCode({
      accountId: 'alice',
      client: forClient,
      grantId,
      scope: 'openid profile',
      redirectUri: REDIRECT,
      nonce: `n-${i}`,
      codeChallenge: CODE_CHALLENGE,
      codeChallengeMethod: 'S256',
      authTime: Math.floor(Date.now() / 1000),
    });
    codes.push(await code.save());
  }
  return codes;
}

const callback = provider.callback();
https
  .createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (req, res) => {
    if (full && req.method === 'POST' && req.url?.startsWith('/bench/mint?') === true) {
      const q = new URL(req.url, issuer).searchParams;
      const n = Math.min(200_000, Number(q.get('n')) || 0);
      mint(n, q.get('client') ?? CLIENT_ID).then(
        (codes) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(codes)),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
      return;
    }
    callback(req, res);
  })
  .listen(port, '127.0.0.1', () => {
    process.stdout.write(`listening ${issuer} ${JSON.stringify({ accessToken, refreshToken, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, ...extra })}\n`);
  });
