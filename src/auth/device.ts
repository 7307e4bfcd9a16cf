/*
 * The device authorization grant (RFC 8628; docs/decisions.md, "Device authorization grant").
 * A device without a browser asks for a device code and a user code; the user enters the user
 * code on /oauth2/device, signed in, and approves or denies; meanwhile the device polls the
 * token endpoint with its device code (grants/device-code.ts). Both codes are stored only as
 * SHA-256 hashes.
 */
import { randomInt } from 'node:crypto';
import { giveBackAll, reserveAttempts } from './accounts.js';
import { throttleAddress } from '../http/client-address.js';
import { findAppByClientId, type Application } from './applications.js';
import { constantTimeEqual, randomToken, tokenHash } from './crypto.js';
import type { AuthDeps } from './deps.js';
import { OAuthError } from './errors.js';
import { parseScope } from './scopes.js';

export const DEVICE_PAGE = '/oauth2/device';

/** How long a device code and its user code can be used (seconds). */
const DEVICE_CODE_LIFETIME_SECONDS = 600;
/** The polling interval given out (seconds; RFC 8628's default); each slow_down adds 5. */
const DEVICE_POLL_INTERVAL_SECONDS = 5;
/** 20 consonants: no vowels (so no words), no digits, nothing two of them could be mistaken for (RFC 8628 §6.1). */
const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
const USER_CODE_LENGTH = 8;
/** Waiting device codes per application (a bound on the table; a client over it is refused until some expire). */
const MAX_PENDING_PER_APP = 10_000;
/** Wrong user codes allowed per 15-minute window (sign-in's windows): per client address (IPv6 per /64), per account, and from everyone together. */
const USER_CODE_ADDRESS_LIMIT = 10;
const USER_CODE_ACCOUNT_LIMIT = 10;
const USER_CODE_GLOBAL_LIMIT = 1000;
/** Past the global bound, lookups in this process take turns this far apart; at most this many wait. */
const SLOW_LANE_INTERVAL_MS = 1000;
const SLOW_LANE_WAITING = 30;
/** Rows are kept this long past their expiry (to answer expired_token rather than invalid_grant), then deleted. */
const KEEP_EXPIRED_MS = 24 * 3600 * 1000;

export interface DeviceAuthorization {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

function newUserCode(): string {
  let code = '';
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return code;
}

/** A user code as shown: XXXX-XXXX. */
function formatUserCode(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

/** A user code as typed, in its stored form: upper case, dashes and spaces dropped; undefined when it cannot be one. */
function normalizeUserCode(typed: string): string | undefined {
  if (typed.length > 64) return undefined;
  const code = typed.toUpperCase().replace(/[\s-]+/g, '');
  return code.length === USER_CODE_LENGTH && [...code].every((c) => USER_CODE_ALPHABET.includes(c)) ? code : undefined;
}

/** RFC 8628 §3.1–3.2: a device authorization request of an authenticated (or public) client. */
export async function startDeviceAuthorization(deps: AuthDeps, app: Application, scopeParam: string | undefined): Promise<DeviceAuthorization> {
  const scope = parseScope(scopeParam ?? '');
  if ('unknown' in scope) throw new OAuthError('invalid_scope', `Unsupported scope: ${scope.unknown}`);
  if (scope.mask === 0) throw new OAuthError('invalid_scope', 'A scope is required');
  const now = deps.clock.now();
  await deps.db.deleteFrom('oauth_device_code').where('expires_at', '<', now - KEEP_EXPIRED_MS).execute();
  const pending = await deps.db
    .selectFrom('oauth_device_code')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('application_id', '=', app.id)
    .where('expires_at', '>', now)
    .executeTakeFirstOrThrow();
  if (Number(pending.n) >= MAX_PENDING_PER_APP) throw new OAuthError('temporarily_unavailable', 'Too many device codes of this application are waiting; try again later', 429);
  const deviceCode = randomToken();
  // A user code already taken (by a live or recently expired request) is drawn again.
  for (let attempt = 0; attempt < 5; attempt++) {
    const userCode = newUserCode();
    const inserted = await deps.db
      .insertInto('oauth_device_code')
      .values({
        device_hash: tokenHash(deviceCode),
        user_code_hash: tokenHash(userCode),
        application_id: app.id,
        scope: scope.mask,
        scope_text: scope.spelled,
        created_at: now,
        expires_at: now + DEVICE_CODE_LIFETIME_SECONDS * 1000,
        interval_s: DEVICE_POLL_INTERVAL_SECONDS,
        polled_at: null,
        decision: null,
        account_id: null,
        auth_time: null,
        used_at: null,
      })
      .onConflict((oc) => oc.doNothing())
      .returning('id')
      .executeTakeFirst();
    if (inserted === undefined) continue;
    const page = `${deps.authUrl}${DEVICE_PAGE}`;
    const shown = formatUserCode(userCode);
    return {
      device_code: deviceCode,
      user_code: shown,
      verification_uri: page,
      verification_uri_complete: `${page}?${new URLSearchParams({ user_code: shown })}`,
      expires_in: DEVICE_CODE_LIFETIME_SECONDS,
      interval: DEVICE_POLL_INTERVAL_SECONDS,
    };
  }
  throw new OAuthError('temporarily_unavailable', 'No free user code was found; try again', 503);
}

/** A request waiting for the user's decision, found by its user code. */
export interface PendingDevice {
  id: number;
  userCode: string;
  app: Application;
  scope: number;
}

export type UserCodeRefusal = { refused: 'malformed' | 'unknown' | 'expired' | 'used' } | { refused: 'throttled'; retryAfterSeconds: number };

/**
 * Lookups past the global bound, in this process: one per SLOW_LANE_INTERVAL_MS (of real time),
 * the others waiting their turn (at most SLOW_LANE_WAITING; one more is refused).
 */
class SlowLane {
  private next = 0;
  private waiting = 0;

  /** Resolves at the caller's turn (true), or at once with false when too many wait. */
  async turn(): Promise<boolean> {
    const now = performance.now();
    if (this.next <= now) {
      this.next = now + SLOW_LANE_INTERVAL_MS;
      return true;
    }
    if (this.waiting >= SLOW_LANE_WAITING) return false;
    const at = this.next;
    this.next += SLOW_LANE_INTERVAL_MS;
    this.waiting++;
    try {
      await new Promise((resolve) => setTimeout(resolve, at - now));
    } finally {
      this.waiting--;
    }
    return true;
  }
}

const slowLanes = new WeakMap<AuthDeps['db'], SlowLane>();

function slowLane(deps: AuthDeps): SlowLane {
  let lane = slowLanes.get(deps.db);
  if (lane === undefined) {
    lane = new SlowLane();
    slowLanes.set(deps.db, lane);
  }
  return lane;
}

/**
 * The pending request of a user code typed on the page by a signed-in user (`accountId`). Each
 * lookup first reserves an attempt per client address (IPv6 per /64) and per account, as
 * sign-in does, then one of everyone's together; one that finds a pending request gives them
 * back, any other keeps them (so guesses are counted, however many arrive at once, in however
 * many processes). Past the global bound a lookup is not refused: it waits its turn in this
 * process's slow lane, so guesses slow down for everyone while a user's valid code still works.
 */
export async function findByUserCode(deps: AuthDeps, typed: string, address: string, accountId: number): Promise<PendingDevice | UserCodeRefusal> {
  const code = normalizeUserCode(typed);
  if (code === undefined) return { refused: 'malformed' };
  const now = deps.clock.now();
  const own = await reserveAttempts(
    deps,
    [
      [`user_code:address:${throttleAddress(address)}`, USER_CODE_ADDRESS_LIMIT],
      [`user_code:account:${accountId}`, USER_CODE_ACCOUNT_LIMIT],
    ],
    now,
  );
  if ('retryAfterMs' in own) return { refused: 'throttled', retryAfterSeconds: Math.ceil(own.retryAfterMs / 1000) };
  const all = await reserveAttempts(deps, [['user_code:all', USER_CODE_GLOBAL_LIMIT]], now);
  const held = 'held' in all ? [...own.held, ...all.held] : own.held;
  if ('retryAfterMs' in all && !(await slowLane(deps).turn())) {
    await giveBackAll(deps, held);
    return { refused: 'throttled', retryAfterSeconds: Math.ceil((SLOW_LANE_WAITING * SLOW_LANE_INTERVAL_MS) / 1000) };
  }
  const hash = tokenHash(code);
  const row = await deps.db
    .selectFrom('oauth_device_code as d')
    .innerJoin('oauth_application as a', 'a.id', 'd.application_id')
    .select(['d.id', 'd.user_code_hash', 'd.scope', 'd.expires_at', 'd.decision', 'd.used_at', 'a.client_id'])
    .where('d.user_code_hash', '=', hash)
    .executeTakeFirst();
  if (row === undefined || !constantTimeEqual(row.user_code_hash, hash)) return { refused: 'unknown' };
  if (row.decision !== null || row.used_at !== null) return { refused: 'used' };
  if (row.expires_at <= now) return { refused: 'expired' };
  const app = await findAppByClientId(deps, row.client_id);
  if (app === undefined) return { refused: 'unknown' };
  await giveBackAll(deps, held);
  return { id: row.id, userCode: formatUserCode(code), app, scope: row.scope };
}

/** Records the user's decision on a pending request; false when it was decided, used or expired meanwhile. */
export async function decideDevice(deps: AuthDeps, id: number, decision: 'approved' | 'denied', viewer: { accountId: number; signedInAt: number }): Promise<boolean> {
  const now = deps.clock.now();
  const r = await deps.db
    .updateTable('oauth_device_code')
    .set({ decision, account_id: viewer.accountId, auth_time: viewer.signedInAt })
    .where('id', '=', id)
    .where('decision', 'is', null)
    .where('used_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** What a user decided, for the page after the decision: only for that user. */
export async function decisionOf(deps: AuthDeps, id: number, accountId: number): Promise<{ appName: string; decision: 'approved' | 'denied' } | undefined> {
  const row = await deps.db
    .selectFrom('oauth_device_code as d')
    .innerJoin('oauth_application as a', 'a.id', 'd.application_id')
    .select(['a.name', 'd.decision'])
    .where('d.id', '=', id)
    .where('d.account_id', '=', accountId)
    .executeTakeFirst();
  return row === undefined || row.decision === null ? undefined : { appName: row.name, decision: row.decision };
}
