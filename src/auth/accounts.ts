import { sql } from 'kysely';
import type { Db } from '../db/schema.js';
import { throttleAddress } from '../http/client-address.js';
import { AppError, invalidInput } from '../shared/errors.js';
import type { AuthDeps } from './deps.js';
import { dummyPasswordHash, hashPassword, needsRehash, PasswordHashingBusy, randomToken, tokenHash, verifyPassword } from './crypto.js';

export interface Account {
  id: number;
  name: string;
  email: string | null;
  email_verified: number;
  website: string | null;
  gender: string | null;
  zoneinfo: string;
  birth_date: string | null;
  country: string | null;
}

const ACCOUNT_COLUMNS = ['id', 'name', 'email', 'email_verified', 'website', 'gender', 'zoneinfo', 'birth_date', 'country'] as const;
const GENDERS = ['male', 'female', 'other', 'not applicable', 'non-binary'];

export interface AddUserInput {
  name: string;
  email?: string;
  emailVerified?: boolean;
  password: string;
  website?: string;
  gender?: string;
  zoneinfo?: string;
  birthDate?: string;
  country?: string;
  /** `editor` (the default) or `approver`. */
  role?: string;
}

/**
 * What an account may do with cover art (docs/decisions.md, "Cover art edits and approval"):
 * every account is an editor; an approver's changes apply at once under review, and an
 * approver approves or rejects the changes of others.
 */
export type Role = 'editor' | 'approver';
export const ROLES: readonly Role[] = ['editor', 'approver'];

function parseRole(text: string): Role {
  const role = text.trim().toLowerCase();
  if (!(ROLES as readonly string[]).includes(role)) throw invalidInput(`role must be one of ${ROLES.join(', ')}`);
  return role as Role;
}

/** Creates an account with an scrypt password hash. */
export async function addUser(deps: AuthDeps, input: AddUserInput): Promise<Account> {
  const name = input.name.normalize('NFC').trim();
  if (name === '' || name.length > 64 || /[\u0000-\u001f\u007f/]/.test(name)) throw invalidInput('user name must be 1–64 characters, without control characters or "/"');
  if (input.email !== undefined && !/^[^\s@]+@[^\s@]+$/.test(input.email)) throw invalidInput(`email ${JSON.stringify(input.email)} is not an email address`);
  if (input.password.length < 8) throw invalidInput('the password must have at least 8 characters');
  if (input.password.length > 1024) throw invalidInput('the password is too long');
  if (input.gender !== undefined && !GENDERS.includes(input.gender.toLowerCase())) throw invalidInput(`gender must be one of ${GENDERS.join(', ')}`);
  if (input.website !== undefined && !/^https?:\/\/\S+$/.test(input.website)) throw invalidInput('website must be an http(s) URL');
  if (input.birthDate !== undefined && !/^\d{4}-\d{2}-\d{2}$/.test(input.birthDate)) throw invalidInput('birth date must be YYYY-MM-DD');
  if (input.country !== undefined && !/^[A-Z]{2}$/.test(input.country)) throw invalidInput('country must be a two-letter ISO 3166 code such as GB');
  const role = parseRole(input.role ?? 'editor');
  if (input.zoneinfo !== undefined) {
    try {
      new Intl.DateTimeFormat('en', { timeZone: input.zoneinfo });
    } catch {
      throw invalidInput(`unknown time zone ${JSON.stringify(input.zoneinfo)}`);
    }
  }
  const password_hash = await hashPassword(input.password, deps.passwords);
  const existing = await deps.db.selectFrom('account').select('id').where('name_key', '=', name.toLowerCase()).executeTakeFirst();
  if (existing !== undefined) throw new AppError('CONFLICT', `user ${name} already exists`);
  try {
    return await deps.db
      .insertInto('account')
      .values({
        name,
        name_key: name.toLowerCase(),
        email: input.email ?? null,
        email_verified: input.emailVerified === true ? 1 : 0,
        password_hash,
        website: input.website ?? null,
        gender: input.gender?.toLowerCase() ?? null,
        zoneinfo: input.zoneinfo ?? 'UTC',
        birth_date: input.birthDate ?? null,
        country: input.country ?? null,
        created_at: deps.clock.now(),
        role,
      })
      .returning(ACCOUNT_COLUMNS)
      .executeTakeFirstOrThrow();
  } catch (err) {
    // Two runs adding the same name at once: the unique index decides, the loser hears why.
    if (await deps.db.selectFrom('account').select('id').where('name_key', '=', name.toLowerCase()).executeTakeFirst()) {
      throw new AppError('CONFLICT', `user ${name} already exists`);
    }
    throw err;
  }
}

/** The roles of an account (every account is an editor; some are approvers too); empty when there is no such account. */
export async function accountRoles(deps: Pick<AuthDeps, 'db'>, accountId: number): Promise<Role[]> {
  const row = await deps.db.selectFrom('account').select('role').where('id', '=', accountId).executeTakeFirst();
  if (row === undefined) return [];
  return row.role === 'approver' ? ['editor', 'approver'] : ['editor'];
}

/** Gives a user a role; returns the account and the role it had. */
export async function setUserRole(deps: Pick<AuthDeps, 'db'>, name: string, roleText: string): Promise<{ account: Account; role: Role; previous: Role }> {
  const role = parseRole(roleText);
  const nameKey = name.normalize('NFC').trim().toLowerCase();
  return deps.db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('account').select([...ACCOUNT_COLUMNS, 'role']).where('name_key', '=', nameKey).executeTakeFirst();
    if (row === undefined) throw new AppError('NOT_FOUND', `no user ${name}`);
    await trx.updateTable('account').set({ role }).where('id', '=', row.id).execute();
    const { role: previous, ...account } = row;
    return { account, role, previous: previous === 'approver' ? 'approver' : 'editor' };
  });
}

export async function findAccountByName(deps: AuthDeps, name: string): Promise<Account | undefined> {
  return deps.db.selectFrom('account').select(ACCOUNT_COLUMNS).where('name_key', '=', name.normalize('NFC').trim().toLowerCase()).executeTakeFirst();
}

export async function findAccount(deps: AuthDeps, id: number): Promise<Account | undefined> {
  return deps.db.selectFrom('account').select(ACCOUNT_COLUMNS).where('id', '=', id).executeTakeFirst();
}

/*
 * Sign-in throttling (docs/decisions.md, "Sign-in throttling"). Attempts are counted per key
 * in a fixed 15-minute window that starts with the key's first attempt. Each password check
 * first reserves its attempt, in one atomic statement, on every key it is counted against; a
 * reservation past the key's limit is refused and given back, so at most `limit` checks run
 * per key and window however many requests arrive at once, in however many processes. A
 * failed check keeps its reservation (it is the failure); a successful one, or one that could
 * not run, gives it back.
 *
 * Which keys: a browser that holds a device cookie of this account (it signed in to it before)
 * is counted on that device alone, so a lockout of the account by someone else never keeps
 * the owner out (OWASP's device cookies). Everyone else is counted per account and per client
 * address.
 */
const WINDOW_MS = 15 * 60 * 1000;
const ACCOUNT_LIMIT = 5;
const ADDRESS_LIMIT = 20;
const DEVICE_LIMIT = 5;
/** How long a device cookie stays valid, and how many devices an account keeps (the newest). */
const DEVICE_TTL_MS = 365 * 24 * 3600 * 1000;
const DEVICES_PER_ACCOUNT = 20;
/** Ended windows are purged at most this often per process, by the next sign-in attempt. */
const PURGE_EVERY_MS = 60 * 1000;

export interface Reservation {
  key: string;
  windowStart: number;
}

/** Counts one attempt on `key`; granted when that leaves the key within its limit. */
async function reserve(deps: AuthDeps, key: string, limit: number, now: number): Promise<{ granted: Reservation } | { retryAfterMs: number }> {
  const at = sql<number>`CAST(${now} AS BIGINT)`;
  const expired = sql<boolean>`${at} - login_throttle.window_start >= ${sql.lit(WINDOW_MS)}`;
  const row = await deps.db
    .insertInto('login_throttle')
    .values({ key, attempts: 1, window_start: now })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet({
        attempts: sql<number>`CASE WHEN ${expired} THEN 1 ELSE login_throttle.attempts + 1 END`,
        window_start: sql<number>`CASE WHEN ${expired} THEN ${at} ELSE login_throttle.window_start END`,
      }),
    )
    .returning(['attempts', 'window_start'])
    .executeTakeFirstOrThrow();
  const reservation = { key, windowStart: Number(row.window_start) };
  if (Number(row.attempts) <= limit) return { granted: reservation };
  await giveBack(deps, reservation);
  return { retryAfterMs: Math.max(1000, reservation.windowStart + WINDOW_MS - now) };
}

/** Returns a reservation (unless its window has ended and been started again since). */
async function giveBack(deps: AuthDeps, r: Reservation): Promise<void> {
  await deps.db
    .updateTable('login_throttle')
    .set({ attempts: sql<number>`attempts - 1` })
    .where('key', '=', r.key)
    .where('window_start', '=', r.windowStart)
    .where('attempts', '>', 0)
    .execute();
}

const lastPurge = new WeakMap<Db, number>();

/** Deletes throttle rows whose window has ended and device cookies that have expired. */
async function purgeSigninRows(deps: AuthDeps, now = deps.clock.now()): Promise<void> {
  lastPurge.set(deps.db, now);
  await deps.db.deleteFrom('login_throttle').where('window_start', '<=', now - WINDOW_MS).execute();
  await deps.db.deleteFrom('signin_device').where('expires_at', '<=', now).execute();
}

/**
 * Throttling of any other secret guessed by the user, on the same table and windows: reserves one
 * attempt on each key, in order; the reservations held, or how long until the refusing key's
 * window ends (those held already given back). The caller gives them back on success, and keeps
 * them on failure (they are the failures counted). Ended windows are purged now and then.
 */
export async function reserveAttempts(deps: AuthDeps, keys: readonly (readonly [string, number])[], now: number): Promise<{ held: Reservation[] } | { retryAfterMs: number }> {
  if (now - (lastPurge.get(deps.db) ?? -Infinity) >= PURGE_EVERY_MS) await purgeSigninRows(deps, now);
  const held: Reservation[] = [];
  for (const [key, limit] of keys) {
    const r = await reserve(deps, key, limit, now);
    if ('granted' in r) held.push(r.granted);
    else {
      await giveBackAll(deps, held);
      return r;
    }
  }
  return { held };
}

/** Gives back what reserveAttempts held. */
export async function giveBackAll(deps: AuthDeps, held: readonly Reservation[]): Promise<void> {
  await Promise.all(held.map((r) => giveBack(deps, r)));
}

/** The device nonce a browser sent, when it is valid for this account (looked up for unknown names too: same timing). */
async function trustedDevice(deps: AuthDeps, token: string | undefined, accountId: number | undefined, now: number): Promise<string | undefined> {
  if (token === undefined || !/^[A-Za-z0-9_-]{43}$/.test(token)) return undefined;
  const hash = tokenHash(token);
  const row = await deps.db.selectFrom('signin_device').select('account_id').where('token_hash', '=', hash).where('expires_at', '>', now).executeTakeFirst();
  return row !== undefined && row.account_id === accountId ? hash : undefined;
}

/** A new device cookie for this account (replacing the one the browser had): OWASP issues one at every sign-in. */
async function issueDevice(deps: AuthDeps, accountId: number, previous: string | undefined, now: number): Promise<DeviceCookie> {
  const token = randomToken();
  if (previous !== undefined) await deps.db.deleteFrom('signin_device').where('token_hash', '=', previous).execute();
  await deps.db.insertInto('signin_device').values({ token_hash: tokenHash(token), account_id: accountId, created_at: now, expires_at: now + DEVICE_TTL_MS }).execute();
  // Each account keeps its newest devices only, so the table is bounded per account.
  const keep = deps.db.selectFrom('signin_device').select('token_hash').where('account_id', '=', accountId).orderBy('created_at', 'desc').limit(DEVICES_PER_ACCOUNT);
  await deps.db.deleteFrom('signin_device').where('account_id', '=', accountId).where('token_hash', 'not in', keep).execute();
  return { token, maxAgeSeconds: DEVICE_TTL_MS / 1000 };
}

export interface DeviceCookie {
  token: string;
  maxAgeSeconds: number;
}

export interface SigninAttempt {
  name: string;
  password: string;
  /** The client's address (after trusted proxies). */
  address: string;
  /** The browser's device cookie, if it sent one. */
  device?: string | undefined;
}

export type LoginResult =
  | { ok: true; account: Account; device: DeviceCookie }
  | { ok: false; reason: 'bad_password' | 'unknown_user' }
  | { ok: false; reason: 'throttled'; retryAfterSeconds: number }
  /** Every hashing thread busy and the queue full: nothing was checked or counted. */
  | { ok: false; reason: 'busy' };

/**
 * Makes a password's hash again at the hasher's cost (SLEEVE_PASSWORD_HASH_COST changed since it
 * was made), once the password is known good. Only if the stored hash is still the one checked; a
 * busy hasher leaves it for the next sign-in.
 */
async function rehash(deps: AuthDeps, row: { id: number; password_hash: string }, password: string): Promise<void> {
  let fresh: string;
  try {
    fresh = await hashPassword(password, deps.passwords);
  } catch (err) {
    if (err instanceof PasswordHashingBusy) return;
    throw err;
  }
  await deps.db.updateTable('account').set({ password_hash: fresh }).where('id', '=', row.id).where('password_hash', '=', row.password_hash).execute();
}

/** Checks a name and password, throttled per device cookie, or per account and per address. */
export async function authenticate(deps: AuthDeps, attempt: SigninAttempt): Promise<LoginResult> {
  const now = deps.clock.now();
  if (now - (lastPurge.get(deps.db) ?? -Infinity) >= PURGE_EVERY_MS) await purgeSigninRows(deps, now);
  const nameKey = attempt.name.normalize('NFC').trim().toLowerCase();
  const row = await deps.db.selectFrom('account').select([...ACCOUNT_COLUMNS, 'password_hash']).where('name_key', '=', nameKey).executeTakeFirst();
  const device = await trustedDevice(deps, attempt.device, row?.id, now);
  // Names longer than any account's share keys by their first 100 characters (stricter, never looser).
  const keys: [string, number][] =
    device !== undefined
      ? [[`device:${device}`, DEVICE_LIMIT]]
      : [
          [`account:${nameKey.slice(0, 100)}`, ACCOUNT_LIMIT],
          [`address:${throttleAddress(attempt.address)}`, ADDRESS_LIMIT],
        ];
  const held: Reservation[] = [];
  const giveAllBack = () => Promise.all(held.map((r) => giveBack(deps, r)));
  for (const [key, limit] of keys) {
    const r = await reserve(deps, key, limit, now);
    if ('granted' in r) {
      held.push(r.granted);
      continue;
    }
    await giveAllBack();
    return { ok: false, reason: 'throttled', retryAfterSeconds: Math.ceil(r.retryAfterMs / 1000) };
  }
  let valid: boolean;
  try {
    // Hash even when there is no such account, so timing does not tell which names exist.
    valid = await verifyPassword(attempt.password, row?.password_hash ?? dummyPasswordHash(deps.passwords), deps.passwords);
  } catch (err) {
    await giveAllBack();
    if (err instanceof PasswordHashingBusy) return { ok: false, reason: 'busy' };
    throw err;
  }
  // A failure keeps its reservations: they are the failure counted.
  if (row === undefined) return { ok: false, reason: 'unknown_user' };
  if (!valid) return { ok: false, reason: 'bad_password' };
  await giveAllBack();
  if (needsRehash(row.password_hash, deps.passwords)) await rehash(deps, row, attempt.password);
  const { password_hash: _omit, ...account } = row;
  return { ok: true, account, device: await issueDevice(deps, account.id, device, now) };
}

const SESSION_TTL_MS = 14 * 24 * 3600 * 1000;

/** Starts a session; the returned token goes in the cookie, only its hash is stored. */
export async function createSession(deps: AuthDeps, accountId: number): Promise<{ token: string; maxAgeSeconds: number }> {
  const token = randomToken();
  const now = deps.clock.now();
  await deps.db.insertInto('web_session').values({ id_hash: tokenHash(token), account_id: accountId, created_at: now, expires_at: now + SESSION_TTL_MS }).execute();
  await deps.db.deleteFrom('web_session').where('expires_at', '<', now).execute();
  return { token, maxAgeSeconds: SESSION_TTL_MS / 1000 };
}

/** The session's account, and when the user signed in (a session starts at each sign-in; epoch ms). */
export async function sessionAccount(deps: AuthDeps, token: string | undefined): Promise<(Account & { signed_in_at: number }) | undefined> {
  if (token === undefined || token.length > 100) return undefined;
  return deps.db
    .selectFrom('web_session as s')
    .innerJoin('account as a', 'a.id', 's.account_id')
    .select([...ACCOUNT_COLUMNS.map((c) => `a.${c}` as const), 's.created_at as signed_in_at'])
    .where('s.id_hash', '=', tokenHash(token))
    .where('s.expires_at', '>', deps.clock.now())
    .executeTakeFirst();
}

export async function endSession(deps: AuthDeps, token: string | undefined): Promise<void> {
  if (token !== undefined) await deps.db.deleteFrom('web_session').where('id_hash', '=', tokenHash(token)).execute();
}
