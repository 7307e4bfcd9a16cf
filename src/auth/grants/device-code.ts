/*
 * `grant_type=urn:ietf:params:oauth:grant-type:device_code`: the device access token request of
 * the device authorization grant (RFC 8628 §3.4–3.5; docs/decisions.md, "Device authorization
 * grant"). The device authorization request and the user's decision are auth/device.ts.
 *
 * §3.4 in its order (handler): the request's parameters (`device_code`, `client_id`); the client
 * authenticated (RFC 6749 §3.2.1; a public client by its client_id); then the device code, and
 * §3.5's answers while the user has not approved: authorization_pending, slow_down,
 * access_denied, expired_token. An approved code gives tokens once, bound to the request's DPoP
 * key when it sends a proof (RFC 9449 §5).
 */
import { findAccount } from '../accounts.js';
import { findAppByClientId, registeredRedirectUris, type Application } from '../applications.js';
import type { AuthContext } from '../context.js';
import { constantTimeEqual, tokenHash } from '../crypto.js';
import type { AuthDeps } from '../deps.js';
import { OAuthError } from '../errors.js';
import type { RequestView } from '../http-util.js';
import { OOB_URI } from '../redirect-uris.js';
import { tokenRequestProof } from '../routes/oauth/dpop.js';
import { checkParams, hasBasicAuth, requireClient } from '../routes/oauth/shared.js';
import { exchangeCode, issueCode } from './authorization-code.js';
import { revokeGrant, type TokenResponse } from './shared.js';

export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

/** §3.4: the request's parameters, each checked for repetition; `device_code` is required. */
const PARAMETERS = ['client_id', 'client_secret', 'grant_type', 'device_code'];
const REQUIRED = new Set(['grant_type', 'device_code']);

/** The token endpoint's answer to the device grant: the request's parameters, its client, its DPoP proof, then the device code (pollDevice). */
export async function handler(ctx: AuthContext, req: RequestView): Promise<TokenResponse> {
  const params = checkParams(req, PARAMETERS, REQUIRED);
  const client = await deviceClient(ctx.deps, req, params);
  // With a DPoP proof, the tokens are bound to its key, as in the code flow.
  const proof = await tokenRequestProof(ctx, req, client);
  return pollDevice(ctx.deps, client, params.get('device_code') as string, proof?.jkt, proof?.remember);
}

/**
 * The client of a device grant request (RFC 8628 §3.1, §3.4), at the device authorization
 * endpoint and at the token endpoint: authenticated as at the token endpoint (HTTP Basic, or
 * client_id and client_secret in the body), or, for a public (installed) application, its
 * client_id alone: its secret ships inside it and proves nothing, and the device code (256
 * random bits) is what the exchange rests on.
 */
export async function deviceClient(deps: AuthDeps, req: RequestView, params: Map<string, string>): Promise<Application> {
  if (hasBasicAuth(req) || params.has('client_secret')) return requireClient(deps, req, params);
  const clientId = params.get('client_id');
  const app = clientId === undefined ? undefined : await findAppByClientId(deps, clientId);
  // A client known by its metadata document is for the code flow only (its document lists redirect URIs, nothing about devices).
  if (app === undefined || app.kind !== 'public' || app.owner_id === null) throw new OAuthError('invalid_client', 'Client not authentified');
  return app;
}

const DEVICE_CODE_RE = /^[A-Za-z0-9_-]{43}$/;

/**
 * The device code's exchange (§3.4–3.5), in the RFC's order: the device code this client's;
 * then, while the user
 * has not decided: authorization_pending, or slow_down when polled sooner than the interval
 * (which then grows by 5 seconds); access_denied once denied; expired_token after the lifetime.
 * An approved code is exchanged once, and spent only after its tokens were issued: the exchange
 * mints an authorization code for the approved grant and redeems it at once through the code
 * flow's exchange, so the grant, its tokens and the id_token (for `openid`) come from the one
 * code path.
 */
async function pollDevice(deps: AuthDeps, app: Application, deviceCode: string, dpopJkt?: string, rememberProof?: () => Promise<void>): Promise<TokenResponse> {
  const invalid = () => new OAuthError('invalid_grant', 'Invalid device code');
  if (!DEVICE_CODE_RE.test(deviceCode)) throw invalid();
  const hash = tokenHash(deviceCode);
  const row = await deps.db.selectFrom('oauth_device_code').selectAll().where('device_hash', '=', hash).executeTakeFirst();
  if (row === undefined || row.application_id !== app.id || !constantTimeEqual(row.device_hash, hash)) throw invalid();
  // The device code is this client's: only now is the DPoP proof's jti remembered.
  await rememberProof?.();
  if (row.used_at !== null) throw new OAuthError('invalid_grant', 'The device code has already been used');
  if (row.decision === 'denied') throw new OAuthError('access_denied', 'The user denied the authorization request');
  const now = deps.clock.now();
  if (row.expires_at <= now) throw new OAuthError('expired_token', 'The device code has expired');
  if (row.decision === null) {
    const tooSoon = row.polled_at !== null && now - row.polled_at < row.interval_s * 1000;
    const interval = tooSoon ? row.interval_s + 5 : row.interval_s;
    // Only if no other poll came since the read: of two polls at once, the second is too soon.
    const polled = await deps.db
      .updateTable('oauth_device_code')
      .set({ polled_at: now, interval_s: interval })
      .where('id', '=', row.id)
      .where('polled_at', row.polled_at === null ? 'is' : '=', row.polled_at)
      .where('interval_s', '=', row.interval_s)
      .executeTakeFirst();
    if (Number(polled.numUpdatedRows) !== 1) {
      const slowed = await deps.db
        .updateTable('oauth_device_code')
        .set((eb) => ({ polled_at: now, interval_s: eb('interval_s', '+', 5) }))
        .where('id', '=', row.id)
        .returning('interval_s')
        .executeTakeFirst();
      throw new OAuthError('slow_down', `Polling too fast: wait ${slowed?.interval_s ?? interval + 5} seconds between requests`);
    }
    if (tooSoon) throw new OAuthError('slow_down', `Polling too fast: wait ${interval} seconds between requests`);
    throw new OAuthError('authorization_pending', 'The user has not yet approved the request');
  }
  const account = row.account_id === null ? undefined : await findAccount(deps, row.account_id);
  if (account === undefined) throw invalid();
  // A redirect URI the exchange accepts for this client; nothing is ever sent to it.
  const redirectUri = registeredRedirectUris(app)[0] ?? OOB_URI;
  const code = await issueCode(deps, {
    account,
    app,
    scope: row.scope,
    // Device grants are offline: a device that cannot open a browser cannot sign in again.
    offline: true,
    redirectUri,
    codeChallenge: undefined,
    codeChallengeMethod: undefined,
    scopeText: row.scope_text,
    authTime: row.auth_time ?? now,
  });
  const tokens = await exchangeCode(deps, app, { code, redirectUri, codeVerifier: undefined, dpopJkt });
  // The device code is spent only once its tokens exist: a failure before this point (answered
  // 503 when the database is busy or away) leaves it usable for the next poll. Of polls that
  // raced to here, one claims it; the others' grants are revoked unseen and they are refused.
  const claimed = await deps.db.updateTable('oauth_device_code').set({ used_at: now }).where('id', '=', row.id).where('used_at', 'is', null).executeTakeFirst();
  if (Number(claimed.numUpdatedRows) !== 1) {
    const minted = await deps.db.selectFrom('oauth_code').select('grant_id').where('code_hash', '=', tokenHash(code)).executeTakeFirst();
    if (minted?.grant_id != null) await revokeGrant(deps, minted.grant_id);
    throw new OAuthError('invalid_grant', 'The device code has already been used');
  }
  return tokens;
}
