import { sql } from 'kysely';
import type { Db } from '../db/schema.js';
import type { WriteBatcher } from '../db/write-batch.js';
import type { Clock } from '../shared/clock.js';
import { AppError, invalidInput } from '../shared/errors.js';
import { DUMMY_PASSWORD_HASH, hashPassword, randomToken, tokenHash, verifyPassword } from './crypto.js';

/** What the authorization module needs from the outside world. */
export interface AuthDeps {
  db: Db;
  clock: Clock;
  /** {auth_url}: public URL of the authorization service. */
  authUrl: string;
  accessTokenTtl: number;
  authCodeTtl: number;
  /** Group commit for the hot small writes (token refresh), when the process serves many clients. */
  writes?: WriteBatcher;
}

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
  if (input.zoneinfo !== undefined) {
    try {
      new Intl.DateTimeFormat('en', { timeZone: input.zoneinfo });
    } catch {
      throw invalidInput(`unknown time zone ${JSON.stringify(input.zoneinfo)}`);
    }
  }
  const password_hash = await hashPassword(input.password);
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

export async function findAccountByName(deps: AuthDeps, name: string): Promise<Account | undefined> {
  return deps.db.selectFrom('account').select(ACCOUNT_COLUMNS).where('name_key', '=', name.normalize('NFC').trim().toLowerCase()).executeTakeFirst();
}

export async function findAccount(deps: AuthDeps, id: number): Promise<Account | undefined> {
  return deps.db.selectFrom('account').select(ACCOUNT_COLUMNS).where('id', '=', id).executeTakeFirst();
}

/* Login throttling: failures are counted per account and per client address in a
   15-minute window; past the limit, that key is locked until the window ends. */
const WINDOW_MS = 15 * 60 * 1000;
const ACCOUNT_LIMIT = 5;
const ADDRESS_LIMIT = 20;

async function lockedFor(deps: AuthDeps, key: string, now: number): Promise<number> {
  const row = await deps.db.selectFrom('login_throttle').selectAll().where('key', '=', key).executeTakeFirst();
  return row !== undefined && row.locked_until > now ? row.locked_until - now : 0;
}

/**
 * Counts one failure in a single atomic upsert, so that concurrent failures are all
 * counted and never collide on the insert (a read-then-write lost counts on PostgreSQL
 * and failed with a duplicate key, answering 500).
 */
async function recordFailure(deps: AuthDeps, key: string, limit: number, now: number): Promise<void> {
  const at = sql<number>`CAST(${now} AS BIGINT)`;
  const expired = sql<boolean>`${at} - login_throttle.window_start >= ${sql.lit(WINDOW_MS)}`;
  const lockedIfFirst = limit <= 1 ? sql<number>`${at} + ${sql.lit(WINDOW_MS)}` : sql<number>`0`;
  await deps.db
    .insertInto('login_throttle')
    .values({ key, failures: 1, window_start: now, locked_until: limit <= 1 ? now + WINDOW_MS : 0 })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet({
        failures: sql<number>`CASE WHEN ${expired} THEN 1 ELSE login_throttle.failures + 1 END`,
        window_start: sql<number>`CASE WHEN ${expired} THEN ${at} ELSE login_throttle.window_start END`,
        locked_until: sql<number>`CASE WHEN ${expired} THEN ${lockedIfFirst} WHEN login_throttle.failures + 1 >= ${sql.lit(limit)} THEN login_throttle.window_start + ${sql.lit(WINDOW_MS)} ELSE 0 END`,
      }),
    )
    .execute();
}

export type LoginResult = { ok: true; account: Account } | { ok: false; reason: 'invalid' | 'throttled'; retryAfterSeconds?: number };

/** Checks a name and password, throttled per account and per address. */
export async function authenticate(deps: AuthDeps, name: string, password: string, address: string): Promise<LoginResult> {
  const now = deps.clock.now();
  const accountKey = `account:${name.normalize('NFC').trim().toLowerCase()}`;
  const addressKey = `address:${address}`;
  const wait = Math.max(await lockedFor(deps, accountKey, now), await lockedFor(deps, addressKey, now));
  if (wait > 0) return { ok: false, reason: 'throttled', retryAfterSeconds: Math.ceil(wait / 1000) };

  const row = await deps.db.selectFrom('account').select([...ACCOUNT_COLUMNS, 'password_hash']).where('name_key', '=', accountKey.slice(8)).executeTakeFirst();
  // Hash even when there is no such account, so timing does not tell which names exist.
  const valid = await verifyPassword(password, row?.password_hash ?? DUMMY_PASSWORD_HASH);
  if (row === undefined || !valid) {
    await recordFailure(deps, accountKey, ACCOUNT_LIMIT, now);
    await recordFailure(deps, addressKey, ADDRESS_LIMIT, now);
    return { ok: false, reason: 'invalid' };
  }
  await deps.db.deleteFrom('login_throttle').where('key', '=', accountKey).execute();
  const { password_hash: _omit, ...account } = row;
  return { ok: true, account };
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

export async function sessionAccount(deps: AuthDeps, token: string | undefined): Promise<Account | undefined> {
  if (token === undefined || token.length > 100) return undefined;
  return deps.db
    .selectFrom('web_session as s')
    .innerJoin('account as a', 'a.id', 's.account_id')
    .select(ACCOUNT_COLUMNS.map((c) => `a.${c}` as const))
    .where('s.id_hash', '=', tokenHash(token))
    .where('s.expires_at', '>', deps.clock.now())
    .executeTakeFirst();
}

export async function endSession(deps: AuthDeps, token: string | undefined): Promise<void> {
  if (token !== undefined) await deps.db.deleteFrom('web_session').where('id_hash', '=', tokenHash(token)).execute();
}
