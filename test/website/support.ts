import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import * as client from 'openid-client';
import { loadConfig } from '../../src/config/load.js';
import { serve, type Server } from '../../src/serve.js';
import type { Clock } from '../../src/shared/clock.js';
import { authorize, Browser } from '../helpers/auth.js';
import { freePort, type TestEnv } from '../helpers/env.js';
import { fetchTrusting } from '../helpers/openid-fetch.js';

export const REDIRECT_URI = 'https://tool.example/callback';

export interface Site {
  server: Server;
  /** https://127.0.0.1:PORT: the website (write API, pages, OAuth). */
  web: string;
  /** http://127.0.0.1:PORT: the cover art API. */
  art: string;
  /** The website's self-signed certificate. */
  ca: string;
}

/** Starts both listeners in this process on free ports. */
export async function startSite(t: TestEnv, extra: Record<string, string> = {}, clock?: Clock): Promise<Site> {
  const [webPort, artPort] = [await freePort(), await freePort()];
  const web = `https://127.0.0.1:${webPort}`;
  const art = `http://127.0.0.1:${artPort}`;
  Object.assign(t.env, { SLEEVE_AUTH_LISTEN: `127.0.0.1:${webPort}`, SLEEVE_AUTH_URL: web, SLEEVE_COVERART_LISTEN: `127.0.0.1:${artPort}`, SLEEVE_BASE_URL: art, ...extra });
  const server = await serve(loadConfig(t.env), { clock });
  const ca = readFileSync(path.join(t.env.SLEEVE_DATA_DIR as string, 'tls', 'self-signed-cert.pem'), 'utf8');
  return { server, web, art, ca };
}

/** An access token for `scope`, obtained the way a tool does: openid-client's discovery, authorization code with PKCE, exchange. */
export async function toolToken(site: Site, browser: Browser, app: { client_id: string; client_secret: string }, scope: string): Promise<string> {
  return (await toolTokens(site, browser, app, scope)).token;
}

/** As toolToken, with the client's configuration; with `dpopKey` the exchange sends DPoP proofs (openid-client's handle) and the token is bound to that key. */
export async function toolTokens(
  site: Site,
  browser: Browser,
  app: { client_id: string; client_secret: string },
  scope: string,
  dpopKey?: client.CryptoKeyPair,
): Promise<{ token: string; config: client.Configuration; DPoP: client.DPoPHandle | undefined }> {
  const config = await client.discovery(new URL(site.web), app.client_id, app.client_secret, undefined, { [client.customFetch]: fetchTrusting(site.ca) });
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const url = client.buildAuthorizationUrl(config, { redirect_uri: REDIRECT_URI, scope, state, code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256' });
  const res = await authorize(browser, site.web, Object.fromEntries(url.searchParams));
  assert.equal(res.status, 302, res.body.slice(0, 300));
  const DPoP = dpopKey === undefined ? undefined : client.getDPoPHandle(config, dpopKey);
  const tokens = await client.authorizationCodeGrant(config, new URL(String(res.headers.location)), { pkceCodeVerifier: verifier, expectedState: state }, undefined, DPoP === undefined ? {} : { DPoP });
  return { token: tokens.access_token, config, DPoP };
}

export interface Part {
  name: string;
  value: string | Buffer;
  filename?: string;
  type?: string;
}

/** A multipart/form-data body. */
export function multipart(parts: Part[]): { body: Buffer; type: string } {
  const boundary = `----sleeve${Math.random().toString(16).slice(2)}`;
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename === undefined ? '' : `; filename="${p.filename}"`}`;
    const head = `--${boundary}\r\nContent-Disposition: ${disposition}\r\n${p.filename === undefined ? '' : `Content-Type: ${p.type ?? 'application/octet-stream'}\r\n`}\r\n`;
    chunks.push(Buffer.from(head), Buffer.isBuffer(p.value) ? p.value : Buffer.from(p.value), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), type: `multipart/form-data; boundary=${boundary}` };
}

/** One HTTPS request with a Buffer, string or JSON body (self-signed certificate accepted). */
export { request as call } from '../helpers/auth.js';

/** GET of a cover art API path (the other listener), following nothing; the body parsed when JSON. */
export async function coverArtApi(site: Site, pathname: string): Promise<{ status: number; location: string | undefined; body: string }> {
  const res = await fetch(`${site.art}${pathname}`, { redirect: 'manual', headers: { accept: 'application/json' } });
  return { status: res.status, location: res.headers.get('location') ?? undefined, body: await res.text() };
}

/** The release's listing as the public cover art API serves it now: its redirect followed to index.json. */
export async function publicListing(site: Site, release: string): Promise<{ images: { id: string; types: string[]; comment: string }[] } | undefined> {
  const first = await coverArtApi(site, `/release/${release}/`);
  if (first.status === 404) return undefined;
  assert.equal(first.status, 307, first.body);
  const res = await fetch(first.location as string, { headers: { accept: 'application/json' } });
  assert.equal(res.status, 200);
  return (await res.json()) as { images: { id: string; types: string[]; comment: string }[] };
}

/** An event's listing as the public Event Art Archive API serves it now (/event/{mbid}/ followed to index.json), or undefined when it has no images. */
export async function publicEventListing(site: Site, event: string): Promise<{ event: string; images: { id: string; types: string[]; comment: string; front: boolean; edit: number }[] } | undefined> {
  const first = await coverArtApi(site, `/event/${event}/`);
  if (first.status === 404) return undefined;
  assert.equal(first.status, 307, first.body);
  const res = await fetch(first.location as string, { headers: { accept: 'application/json' } });
  assert.equal(res.status, 200);
  return (await res.json()) as { event: string; images: { id: string; types: string[]; comment: string; front: boolean; edit: number }[] };
}
