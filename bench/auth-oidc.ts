/**
 * auth, continued: the two OpenID/DPoP scenarios, each against oidc-provider doing the same
 * work in the same run (the `full` peer of oidc-peer.ts, on the same core, same certificate):
 *
 * - the code exchange with `openid`: every request a fresh authorization code (openid profile,
 *   a nonce, PKCE S256) answered with an access token and an id_token signed for it, RS256
 *   (OpenID's mandatory algorithm, sleeve's default) and ES256;
 * - a DPoP-bound refresh: a public client's refresh token bound to an ES256 key, every request
 *   with a fresh DPoP proof of that key (checked, its jti recorded), answered with a new
 *   DPoP-bound access token.
 *
 * Codes and proofs are single-use, so before each run a file of requests is written for it
 * (sized from the runs so far), which the wrk script sends in order.
 */
import { writeFileSync } from 'node:fs';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import https from 'node:https';
import path from 'node:path';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { exchangeCode, findAccountByName, issueCode, registerApp } from '../src/auth/index.js';
import { loadConfig } from '../src/config/load.js';
import { openRuntime, type Runtime } from '../src/runtime.js';
import { storeDocumentClient } from '../src/auth/applications.js';
import { DOCUMENT_REDIRECT, type DocumentHost } from './auth-document.js';
import type { LoadResult } from './lib/load.js';
import type { Options } from './lib/options.js';
import { authCaseWanted, check, comparePair, log } from './lib/auth-pair.js';
import { benchScript } from './lib/paths.js';
import { cleanEnv, pinned, startServer, type Server } from './lib/proc.js';
import { SERVER_CORE } from './lib/servers.js';
import { writeScript, type Scenario } from './lib/wrk-rounds.js';

const REDIRECT = 'https://app.example/cb';
/** sleeve's public URL in the benchmark (SLEEVE_AUTH_URL unset): what its proofs' htu name. */
const SLEEVE_AUTH_URL = 'https://localhost:8443';
const OPENID_PROFILE = 256 | 1;
const FORM = 'application/x-www-form-urlencoded';

interface Context {
  opts: Options;
  wrk: string;
  dataDir: string;
  certFile: string;
  keyFile: string;
  sleeve: Server;
  /** Servers started here are added, for the caller to stop. */
  servers: Server[];
  /** The metadata-document client's document, served for sleeve to fetch. */
  documentHost: DocumentHost;
}

/** A wrk script that sends the lines of `file` in order: `body` or `body<TAB>DPoP proof`. */
function linesLua(file: string): string {
  return `local items = {}
for line in io.lines(${JSON.stringify(file)}) do
  if line ~= "" then items[#items + 1] = line end
end
local i = 0
request = function()
  i = i + 1
  -- Past the end the last line is sent again: a used code or proof, answered with an error (counted).
  local line = items[i] or items[#items]
  local headers = { ["Content-Type"] = ${JSON.stringify(FORM)} }
  local tab = line:find("\\t", 1, true)
  local body = line
  if tab then
    body = line:sub(1, tab - 1)
    headers["DPoP"] = line:sub(tab + 1)
  end
  return wrk.format("POST", nil, headers, body)
end
`;
}

interface Proofs {
  privateKey: CryptoKey;
  jwk: JWK;
  jkt: string;
}

function proofFor(key: Proofs, htu: string): Promise<string> {
  return new SignJWT({ jti: randomUUID(), htm: 'POST', htu, iat: Math.floor(Date.now() / 1000) })
    .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: key.jwk })
    .sign(key.privateKey);
}

/**
 * A scenario whose requests are single-use: before each run, `make(n)` gives the n request lines
 * written for it, n sized from the fastest run so far (with room to spare).
 */
function singleUse(label: string, server: Server, urlPath: string, dir: string, name: string, make: (n: number) => Promise<string[]>): Scenario & { first(): Promise<string> } {
  const file = path.join(dir, `${name}.lines`);
  // Sized for the fastest exchange seen here (ES256 at either server, ~8,000/s quiet), so that a first run rarely outruns its codes.
  let fastest = 6000;
  let written = 0;
  return {
    label,
    server,
    path: urlPath,
    script: writeScript(dir, name, linesLua(file)),
    async prepare(seconds: number) {
      const lines = await make(Math.ceil(fastest * seconds * 1.6) + 500);
      writeFileSync(file, `${lines.join('\n')}\n`);
      written = lines.length;
    },
    observe(r: LoadResult) {
      // The rate of answers to unused requests: error answers past the end would size the next run for errors.
      const answered = r.requests > 0 ? (r.rps * Math.min(r.requests, written)) / r.requests : 0;
      // A run that used up its requests went at least that fast: the next one gets more.
      fastest = Math.max(fastest, r.requests > written ? answered * 1.6 : answered);
    },
    exhausted: (r: LoadResult) => r.requests > written,
    async first() {
      return (await make(1))[0] as string;
    },
  };
}

/** One request line, checked to answer 200 before the load. */
async function checkLine(s: Scenario, line: string): Promise<void> {
  const [body, proof] = line.split('\t') as [string, string | undefined];
  await check(s, { method: 'POST', headers: { 'content-type': FORM, ...(proof === undefined ? {} : { dpop: proof }) }, body });
}

/** What sleeve's side needs, made through its own functions on the benchmark's database. */
async function prepareSleeveOidc(rt: Runtime, key: Proofs, verifier: string, documentHost: DocumentHost) {
  const account = await findAccountByName(rt.auth, 'alice');
  if (account === undefined) throw new Error('alice is missing');
  const web = await registerApp(rt.auth, { ownerId: account.id, name: 'Bench OIDC', kind: 'confidential', redirectUri: REDIRECT });
  const webEs = await registerApp(rt.auth, { ownerId: account.id, name: 'Bench OIDC ES256', kind: 'confidential', redirectUri: REDIRECT, idTokenAlg: 'ES256' });
  const tagger = await registerApp(rt.auth, { ownerId: account.id, name: 'Bench DPoP', kind: 'public' });
  const code = await issueCode(rt.auth, { account, app: tagger.app, scope: 1 | 2, offline: true, redirectUri: 'urn:ietf:wg:oauth:2.0:oob', codeChallenge: undefined, codeChallengeMethod: undefined });
  const bound = await exchangeCode(rt.auth, tagger.app, { code, redirectUri: 'urn:ietf:wg:oauth:2.0:oob', codeVerifier: undefined, dpopJkt: key.jkt });
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  /** n codes as sleeve's authorization endpoint issues them (openid profile, a nonce, PKCE S256). */
  // The metadata-document client's row, as a user's consent makes it; its codes record its document's hash.
  const byDocument = await storeDocumentClient(rt.auth, documentHost.document);
  const codes = async (n: number, app = web.app): Promise<string[]> => {
    const out: string[] = [];
    const authTime = Date.now();
    const document = app.id === byDocument.id;
    for (let done = 0; done < n; done += 1000) {
      await rt.database.db.transaction().execute(async (trx) => {
        for (let i = done; i < Math.min(n, done + 1000); i++) {
          const redirectUri = document ? DOCUMENT_REDIRECT : REDIRECT;
          const req = { account, app, scope: OPENID_PROFILE, offline: document, redirectUri, codeChallenge: challenge, codeChallengeMethod: 'S256' as const, nonce: `n-${i}`, authTime, documentHash: document ? documentHost.document.hash : undefined };
          out.push(await issueCode({ ...rt.auth, db: trx }, req));
        }
      });
    }
    return out;
  };
  return { web, webEs, tagger, byDocument, refreshToken: bound.refresh_token as string, codes };
}

/** oidc-provider's tokens made at its start (oidc-peer.ts): its clients and a DPoP-bound refresh token. */
interface PeerTokens {
  clientId: string;
  clientSecret: string;
  dpopRefreshToken: string;
  publicClientId: string;
  es256ClientId: string;
}

/** The `full` oidc-provider peer on its core, bound to the benchmark's DPoP key and PKCE challenge. */
async function startPeer(ctx: Context, key: Proofs, verifier: string): Promise<{ peer: Server; peerTokens: PeerTokens }> {
  const [pCmd, pArgs] = pinned(SERVER_CORE, process.execPath, [benchScript('oidc-peer.js'), ctx.certFile, ctx.keyFile, 'full']);
  const peer = await startServer({
    name: 'oidc-provider (full)',
    cmd: pCmd,
    args: pArgs,
    env: cleanEnv({ NODE_ENV: 'production', BENCH_DPOP_JKT: key.jkt, BENCH_CODE_CHALLENGE: createHash('sha256').update(verifier).digest('base64url') }),
    ready: /listening (https:\/\/\S+)/,
    timeoutMs: 30_000,
  });
  ctx.servers.push(peer);
  const peerTokens = JSON.parse(/listening https:\/\/\S+ (\{.*\})/.exec(peer.output())?.[1] ?? '{}') as PeerTokens;
  return { peer, peerTokens };
}

type OidcCase = 'code_openid' | 'code_openid_es256' | 'dpop_refresh' | 'code_document';
type OidcPairs = Record<OidcCase, (Scenario & { first?: () => Promise<string> })[]>;

/** Codes minted at the peer (its `/bench/mint`) for `clientId`. */
async function peerCodes(peer: Server, n: number, clientId: string): Promise<string[]> {
  const text = await new Promise<string>((resolve, reject) => {
    const req = https.request(`${peer.url}/bench/mint?n=${n}&client=${clientId}`, { method: 'POST', rejectUnauthorized: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => (res.statusCode === 200 ? resolve(Buffer.concat(chunks).toString()) : reject(new Error(`minting codes at the peer: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
  return JSON.parse(text) as string[];
}

/** Each case's servers (oidc-provider, sleeve, and for the code exchanges their floor) and the lines they are sent; `floorLine`: what a floor is sent. */
async function oidcPairs(
  ctx: Context,
  peer: { server: Server; tokens: PeerTokens },
  mine: Awaited<ReturnType<typeof prepareSleeveOidc>>,
  key: Proofs,
  verifier: string,
): Promise<{ pairs: OidcPairs; floorLine: string }> {
  const dir = ctx.dataDir;
  const peerTokens = peer.tokens;
  const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
  const exchangeLine = (clientId: string, secret: string) => (code: string) =>
    form({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, client_secret: secret, code_verifier: verifier });
  const proofs = async (n: number, body: string, htu: string) => {
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(`${body}\t${await proofFor(key, htu)}`);
    return out;
  };
  const sleeveRefresh = form({ grant_type: 'refresh_token', refresh_token: mine.refreshToken, client_id: mine.tagger.app.client_id, client_secret: mine.tagger.clientSecret });
  const peerRefresh = form({ grant_type: 'refresh_token', refresh_token: peerTokens.dpopRefreshToken, client_id: peerTokens.publicClientId });
  // The floor reads its body and nothing in it: a code exchange's form, of the same size as the others'.
  const floorLine = exchangeLine('floor-client', 'floor-secret')('floor-code');
  const floors = { code_openid: await floorOf(ctx, 'RS256', 'code_openid', floorLine), code_openid_es256: await floorOf(ctx, 'ES256', 'code_openid_es256', floorLine) };
  // A metadata-document client sends its client_id and PKCE verifier, no secret.
  const documentLine = (code: string) => form({ grant_type: 'authorization_code', code, redirect_uri: DOCUMENT_REDIRECT, client_id: ctx.documentHost.clientId, code_verifier: verifier });
  const pairs: OidcPairs = {
    code_openid: [
      singleUse('oidc-provider code+id_token', peer.server, '/token', dir, 'peer-code', async (n) => (await peerCodes(peer.server, n, peerTokens.clientId)).map(exchangeLine(peerTokens.clientId, peerTokens.clientSecret))),
      singleUse('sleeve code+id_token', ctx.sleeve, '/oauth2/token', dir, 'sleeve-code', async (n) => (await mine.codes(n)).map(exchangeLine(mine.web.app.client_id, mine.web.clientSecret))),
      ...(floors.code_openid === undefined ? [] : [floors.code_openid]),
    ],
    code_openid_es256: [
      singleUse('oidc-provider code+ES256 id_token', peer.server, '/token', dir, 'peer-code-es', async (n) =>
        (await peerCodes(peer.server, n, peerTokens.es256ClientId)).map(exchangeLine(peerTokens.es256ClientId, peerTokens.clientSecret)),
      ),
      singleUse('sleeve code+ES256 id_token', ctx.sleeve, '/oauth2/token', dir, 'sleeve-code-es', async (n) =>
        (await mine.codes(n, mine.webEs.app)).map(exchangeLine(mine.webEs.app.client_id, mine.webEs.clientSecret)),
      ),
      ...(floors.code_openid_es256 === undefined ? [] : [floors.code_openid_es256]),
    ],
    dpop_refresh: [
      singleUse('oidc-provider DPoP refresh', peer.server, '/token', dir, 'peer-dpop', (n) => proofs(n, peerRefresh, `${peer.server.url}/token`)),
      singleUse('sleeve DPoP refresh', ctx.sleeve, '/oauth2/token', dir, 'sleeve-dpop', (n) => proofs(n, sleeveRefresh, `${SLEEVE_AUTH_URL}/oauth2/token`)),
    ],
    // The goal compares with oidc-provider's exchange for a registered client (it has no metadata documents on by default).
    code_document: [
      singleUse('oidc-provider code+id_token', peer.server, '/token', dir, 'peer-code-doc', async (n) => (await peerCodes(peer.server, n, peerTokens.clientId)).map(exchangeLine(peerTokens.clientId, peerTokens.clientSecret))),
      singleUse('sleeve metadata-document client', ctx.sleeve, '/oauth2/token', dir, 'sleeve-code-doc', async (n) => (await mine.codes(n, mine.byDocument)).map(documentLine)),
    ],
  };
  return { pairs, floorLine };
}

/** The floor of a code exchange whose id_token is signed with `alg` (bench/auth-floor.ts), started only when its case runs. */
async function floorOf(ctx: Context, alg: 'RS256' | 'ES256', name: string, floorLine: string): Promise<Scenario | undefined> {
  if (!authCaseWanted(name)) return undefined;
  const [fCmd, fArgs] = pinned(SERVER_CORE, process.execPath, [benchScript('auth-floor.js'), ctx.certFile, ctx.keyFile, alg]);
  const server = await startServer({ name: `floor ${alg}`, cmd: fCmd, args: fArgs, env: cleanEnv({}), ready: /listening (https:\/\/\S+)/, timeoutMs: 30_000 });
  ctx.servers.push(server);
  const script = writeScript(ctx.dataDir, `floor-${alg}`, `wrk.method = "POST"\nwrk.body = ${JSON.stringify(floorLine)}\nwrk.headers["Content-Type"] = ${JSON.stringify(FORM)}\n`);
  return { label: `floor ${alg}: node:https + jose`, server, path: '/token', script };
}

const OIDC_TITLES: Record<OidcCase, string> = {
  code_openid: 'POST token endpoint, grant_type=authorization_code with openid (an RS256 id_token signed per request, PKCE S256)',
  code_openid_es256: 'POST token endpoint, grant_type=authorization_code with openid (an ES256 id_token signed per request, PKCE S256)',
  dpop_refresh: 'POST token endpoint, grant_type=refresh_token with a DPoP proof (public client, refresh token bound to an ES256 key)',
  code_document: 'POST token endpoint, grant_type=authorization_code with openid for a Client ID Metadata Document client, its document cached (RS256 id_token, PKCE S256, a rotating refresh token), against oidc-provider\'s exchange for a registered client',
};

const OIDC_NOTES = [
  '',
  'Code exchange: both answer an access token and an id_token of the client\'s algorithm (nonce, at_hash on sleeve) for a code minted just before the run through each server\'s own code store (sleeve: `issueCode` into its database; oidc-provider: its `AuthorizationCode` model, stored in a Map adapter since its default in-memory adapter keeps only 1000 entries). sleeve\'s client authenticates with client_secret_post, as the peer\'s.',
  'Floor (the code exchanges\' third server): bench/auth-floor.ts, node:https with the same certificate on the same core, reading each request\'s body and answering a token response with an id_token jose signs for it (a key of the case\'s algorithm), nothing else; its ratio to oidc-provider is the most any server that signs with jose could reach in that run.',
  'DPoP refresh: every request carries a fresh ES256 proof made before the run (jti, htm, htu, iat); both check it, record its jti, check the refresh token\'s binding, and issue a DPoP-bound access token. sleeve\'s public client also sends its (non-secret) client_secret, as the interface has it; oidc-provider\'s uses `none`.',
].join('\n');

export async function oidcScenarios(ctx: Context): Promise<{ ok: boolean; data: Record<string, unknown>; sections: string[] }> {
  const { opts } = ctx;
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = await exportJWK(publicKey);
  const key: Proofs = { privateKey: privateKey as CryptoKey, jwk, jkt: await calculateJwkThumbprint(jwk) };
  const verifier = randomBytes(32).toString('base64url');
  const { peer, peerTokens } = await startPeer(ctx, key, verifier);

  const rt = await openRuntime(loadConfig({ SLEEVE_DATA_DIR: ctx.dataDir, SLEEVE_DEMO: 'off', SLEEVE_LOG_LEVEL: 'warn' }));
  try {
    const mine = await prepareSleeveOidc(rt, key, verifier, ctx.documentHost);
    const { pairs, floorLine } = await oidcPairs(ctx, { server: peer, tokens: peerTokens }, mine, key, verifier);
    for (const pair of Object.values(pairs)) for (const s of pair) await checkLine(s, s.first === undefined ? floorLine : await s.first());

    const data: Record<string, unknown> = {};
    const sections: string[] = [];
    let ok = true;
    for (const name of ['code_openid', 'code_openid_es256', 'dpop_refresh', 'code_document'] as const) {
      if (!authCaseWanted(name)) continue;
      log(`  ${name}`);
      const r = await comparePair(ctx.wrk, pairs[name], opts, OIDC_TITLES[name]);
      if (name === 'code_document') log(`  the client's document was fetched ${ctx.documentHost.fetches()} time(s) in all`);
      ok &&= r.ok;
      data[name] = r.data;
      sections.push(r.section);
    }
    sections.push(OIDC_NOTES);
    return { ok, data, sections };
  } finally {
    await rt.close();
  }
}
