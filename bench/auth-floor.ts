/**
 * The floor of the auth benchmark's code exchange: a bare node:https server (same certificate,
 * pinned to the same core) that reads each POST's body and answers a token response whose
 * id_token jose signs for it (`CompactSign`, a key made at start), and does nothing else: no
 * parameters, no client, no code, no database. What no token endpoint that signs with jose
 * can beat here, so its requests/s against oidc-provider's is the most any server's ratio can
 * be on this machine (bench/RESULTS-archive.md, "Session 12: RS256 code exchange"). Prints `listening https://…` when ready.
 * argv: certFile keyFile RS256|ES256
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { CompactSign, generateKeyPair } from 'jose';

const [certFile = '', keyFile = '', alg = 'RS256'] = process.argv.slice(2);
const { privateKey } = await generateKeyPair(alg);
const header = { alg, kid: 'floor', typ: 'JWT' };
const utf8 = new TextEncoder();
/** An access token's length in sleeve's answers (43 base64url characters). */
const ACCESS_TOKEN = 'a'.repeat(43);

const server = https.createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (req, res) => {
  req.resume();
  req.on('end', () => {
    const iat = Math.floor(Date.now() / 1000);
    const claims = { iss: 'https://localhost:8443', sub: 'alice', aud: 'floor-client', iat, exp: iat + 3600, auth_time: iat, nonce: 'n-0', at_hash: 'aaaaaaaaaaaaaaaaaaaaaa' };
    new CompactSign(utf8.encode(JSON.stringify(claims)))
      .setProtectedHeader(header)
      .sign(privateKey)
      .then(
        (idToken) => {
          const body = JSON.stringify({ access_token: ACCESS_TOKEN, token_type: 'Bearer', expires_in: 3600, id_token: idToken, scope: 'openid profile' });
          res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', pragma: 'no-cache', 'content-length': Buffer.byteLength(body) });
          res.end(body);
        },
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
  });
});
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  process.stdout.write(`listening https://127.0.0.1:${port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
