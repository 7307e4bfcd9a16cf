/**
 * auth: the token endpoint's refresh grant and userinfo, sleeve on the embedded default
 * (`sleeve serve --only auth`, SQLite) against oidc-provider with its in-memory adapter
 * doing the same work, both over HTTPS with the same certificate, pinned to the same
 * core, wrk on the other, rounds interleaved. Goal: sleeve ≥ 1.5× oidc-provider's
 * requests/s for both; p99 printed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadTlsMaterial } from '../src/auth/app.js';
import { addUser, exchangeCode, issueCode, registerApp } from '../src/auth/index.js';
import { loadConfig } from '../src/config/load.js';
import { openRuntime } from '../src/runtime.js';
import { startDocumentHost } from './auth-document.js';
import { oidcScenarios } from './auth-oidc.js';
import { authCaseWanted, check, comparePair } from './lib/auth-pair.js';
import type { Options } from './lib/options.js';
import { benchScript } from './lib/paths.js';
import { cleanEnv, pinned, startServer, which, type Server } from './lib/proc.js';
import { LOAD_CORE, SERVER_CORE, serveCommand, sleeveEnv } from './lib/servers.js';
import { writeScript, type Scenario } from './lib/wrk-rounds.js';

const REDIRECT = 'https://app.example/cb';

interface Tokens {
  accessToken: string;
  refreshToken: string;
  clientId: string;
  clientSecret: string;
}

/** The password of alice (and of the `others`) made by prepareSleeve. */
export const BENCH_PASSWORD = 'benchmark password';

/** A user (alice), a confidential application and an offline grant, made through sleeve's own functions; `others` are more users. */
export async function prepareSleeve(dataDir: string, others: string[] = []): Promise<Tokens> {
  const config = loadConfig({ SLEEVE_DATA_DIR: dataDir, SLEEVE_DEMO: 'off', SLEEVE_LOG_LEVEL: 'warn' });
  const rt = await openRuntime(config);
  try {
    const account = await addUser(rt.auth, { name: 'alice', email: 'alice@example.com', emailVerified: true, password: BENCH_PASSWORD, website: 'https://alice.example' });
    for (const name of others) await addUser(rt.auth, { name, email: `${name}@example.com`, emailVerified: true, password: BENCH_PASSWORD, website: undefined });
    const { app, clientSecret } = await registerApp(rt.auth, { ownerId: account.id, name: 'Bench', kind: 'confidential', redirectUri: REDIRECT });
    // Two grants: each refresh ends its grant's earlier access tokens, so userinfo gets a grant of its own.
    const grant = async () => {
      const code = await issueCode(rt.auth, { account, app, scope: 1 | 2, offline: true, redirectUri: REDIRECT, codeChallenge: undefined, codeChallengeMethod: undefined });
      return exchangeCode(rt.auth, app, { code, redirectUri: REDIRECT, codeVerifier: undefined });
    };
    const forUserinfo = await grant();
    const forRefresh = await grant();
    return { accessToken: forUserinfo.access_token, refreshToken: forRefresh.refresh_token as string, clientId: app.client_id, clientSecret };
  } finally {
    await rt.close();
  }
}

function refreshLua(t: Tokens): string {
  const body = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: t.refreshToken, client_id: t.clientId, client_secret: t.clientSecret }).toString();
  return `wrk.method = "POST"\nwrk.body = ${JSON.stringify(body)}\nwrk.headers["Content-Type"] = "application/x-www-form-urlencoded"\n`;
}

function userinfoLua(t: Tokens): string {
  return `wrk.method = "GET"\nwrk.headers["Authorization"] = ${JSON.stringify(`Bearer ${t.accessToken}`)}\n`;
}

export async function authBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const wrk = which('wrk');
  if (wrk === undefined) throw new Error('the auth benchmark needs wrk (apt-get install wrk): autocannon cannot send these requests over TLS the same way');
  const durationS = opts.duration ?? 8;
  const rounds = opts.rounds ?? 5;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-auth-'));
  const servers: Server[] = [];
  // The metadata-document client's document (bench/auth-document.ts), fetched once by sleeve and then cached.
  const documentHost = await startDocumentHost(dataDir);
  try {
    const sleeveTokens = await prepareSleeve(dataDir);
    // The certificate sleeve makes on first start, made now so the peer can use the same one.
    await loadTlsMaterial({ dataDir, hostnames: ['127.0.0.1'] });
    const certFile = path.join(dataDir, 'tls', 'self-signed-cert.pem');
    const keyFile = path.join(dataDir, 'tls', 'self-signed-key.pem');

    const serve = serveCommand(SERVER_CORE, opts.cpuProf, 'sleeve-auth', ['--only', 'auth']);
    const sleeve = await startServer({
      name: 'sleeve',
      cmd: serve.cmd,
      args: serve.args,
      env: sleeveEnv(dataDir, { SLEEVE_AUTH_LISTEN: '127.0.0.1:0', SLEEVE_LOG_LEVEL: 'info', SLEEVE_CLIENT_METADATA_ALLOW_PRIVATE: 'on', NODE_EXTRA_CA_CERTS: documentHost.ca }),
      ready: /Server listening at (https:\/\/[^"\s]+)/,
      timeoutMs: 60_000,
    });
    servers.push(sleeve);
    const [pCmd, pArgs] = pinned(SERVER_CORE, process.execPath, [benchScript('oidc-peer.js'), certFile, keyFile]);
    const peer = await startServer({ name: 'oidc-provider', cmd: pCmd, args: pArgs, env: cleanEnv({ NODE_ENV: 'production' }), ready: /listening (https:\/\/\S+)/, timeoutMs: 30_000 });
    servers.push(peer);
    const peerTokens = JSON.parse(/listening https:\/\/\S+ (\{.*\})/.exec(peer.output())?.[1] ?? '{}') as Tokens;

    const dir = dataDir;
    const scenarios = {
      refresh: [
        { label: 'oidc-provider refresh', server: peer, path: '/token', script: writeScript(dir, 'peer-refresh', refreshLua(peerTokens)) },
        { label: 'sleeve refresh', server: sleeve, path: '/oauth2/token', script: writeScript(dir, 'sleeve-refresh', refreshLua(sleeveTokens)) },
      ],
      userinfo: [
        { label: 'oidc-provider userinfo', server: peer, path: '/me', script: writeScript(dir, 'peer-userinfo', userinfoLua(peerTokens)) },
        { label: 'sleeve userinfo', server: sleeve, path: '/oauth2/userinfo', script: writeScript(dir, 'sleeve-userinfo', userinfoLua(sleeveTokens)) },
      ],
    };
    const form = (t: Tokens) => ({
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: t.refreshToken, client_id: t.clientId, client_secret: t.clientSecret }).toString(),
    });
    await check(scenarios.refresh[0] as Scenario, form(peerTokens));
    await check(scenarios.refresh[1] as Scenario, form(sleeveTokens));
    await check(scenarios.userinfo[0] as Scenario, { method: 'GET', headers: { authorization: `Bearer ${peerTokens.accessToken}` } });
    await check(scenarios.userinfo[1] as Scenario, { method: 'GET', headers: { authorization: `Bearer ${sleeveTokens.accessToken}` } });

    const sections: string[] = [];
    const data: Record<string, unknown> = {};
    let allOk = true;
    for (const name of ['userinfo', 'refresh'] as const) {
      if (!authCaseWanted(name)) continue;
      const title = name === 'refresh' ? 'POST token endpoint, grant_type=refresh_token' : 'GET userinfo with a bearer token';
      const r = await comparePair(wrk, scenarios[name] as Scenario[], opts, title);
      allOk &&= r.ok;
      data[name] = r.data;
      sections.push(r.section);
    }
    const oidc = await oidcScenarios({ opts, wrk, dataDir, certFile, keyFile, sleeve, servers, documentHost });
    allOk &&= oidc.ok;
    Object.assign(data, oidc.data);
    sections.push(...oidc.sections);
    const markdown = [
      '### auth: refresh grant and userinfo vs oidc-provider 8.8.1 (in-memory adapter)',
      '',
      `${rounds} interleaved rounds × ${durationS} s per server after ${opts.warmup} s warm-up each; ${opts.connections} connections; HTTPS with the same self-signed P-256 certificate, keep-alive; servers on core ${SERVER_CORE}, wrk on core ${LOAD_CORE}.`,
      'sleeve: `sleeve serve --only auth` on SQLite (client secret checked as a SHA-256 hash; each refresh deletes the previous access token and stores the new one\'s hash in one transaction). oidc-provider: confidential client (client_secret_post), refresh token without `openid` so no ID token is signed, userinfo at `/me` with an `openid profile email` token.',
      '',
      ...sections,
    ].join('\n');
    return { markdown, data, goalsMet: allOk };
  } finally {
    await Promise.all(servers.map((x) => x.stop()));
    await documentHost.close();
    if (!opts.keep) await rm(dataDir, { recursive: true, force: true });
  }
}
