/**
 * The peer of the auth benchmark: oidc-provider (the reference Node.js OAuth server)
 * with its default in-memory adapter, over HTTPS with the same certificate as sleeve,
 * one confidential client, and tokens minted through its own models. Prints
 * `listening https://… {tokens}` when ready. Used only by bench/auth.ts.
 * argv: certFile keyFile
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { createServer } from 'node:net';
import Provider from 'oidc-provider';

const [certFile = '', keyFile = ''] = process.argv.slice(2);
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
  ],
  findAccount: async (_ctx: unknown, id: string) => ({
    accountId: id,
    claims: async () => ({ sub: id, profile: `${issuer}/user/${id}`, website: 'https://alice.example', zoneinfo: 'UTC', email: `${id}@example.com`, email_verified: true }),
  }),
  claims: { openid: ['sub'], profile: ['profile', 'website', 'zoneinfo'], email: ['email', 'email_verified'] },
  scopes: ['openid', 'offline_access', 'profile', 'email'],
  features: { devInteractions: { enabled: false } },
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

https.createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, provider.callback()).listen(port, '127.0.0.1', () => {
  process.stdout.write(`listening ${issuer} ${JSON.stringify({ accessToken, refreshToken, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET })}\n`);
});
