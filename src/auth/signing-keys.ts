/*
 * The keys the authorization service signs OpenID Connect id_tokens with (docs/decisions.md,
 * "Signing keys"): one active ES256 and one active RS256 key, kept in the database so every
 * process signs with the same keys and the JWKS is the same whichever process answers.
 *
 * - Keys are made on first start (`ensure`) and by `sleeve keys rotate`; a unique index on
 *   `active_alg` lets at most one key per algorithm sign, so processes starting at once on a
 *   fresh database agree on one (the losers' inserts do nothing).
 * - A retired key stays in the JWKS until every token it signed has expired (`expires_at`:
 *   its retirement plus the longest lifetime of a token it signs plus a margin), then is
 *   pruned.
 * - Private keys are read only to sign: nothing here logs or returns them.
 *
 * jose is loaded on first use, so the short CLI commands that never sign do not pay for it.
 */
import type { CryptoKey, JWK } from 'jose';
import type { Db } from '../db/schema.js';
import type { Clock } from '../shared/clock.js';
import { failpoint } from '../shared/failpoint.js';

export type SigningAlg = 'ES256' | 'RS256';

/** Every algorithm sleeve signs id_tokens with: ES256 (today's MetaBrainz) and RS256 (OpenID's mandatory one). */
export const SIGNING_ALGS: readonly SigningAlg[] = ['ES256', 'RS256'];

/**
 * The longest lifetime (seconds) of anything a key signs: an id_token's. A signer refuses a
 * longer one, so a key never leaves the JWKS while a token it signed is still valid.
 */
export const MAX_SIGNED_LIFETIME_SECONDS = 3600;

/**
 * How long a process keeps signing with the active key it read (ms): a key retired in another
 * process (`sleeve keys rotate`) is noticed within this time.
 */
const ACTIVE_KEY_CACHE_MS = 60_000;

/**
 * Added to a retired key's stay in the JWKS beyond the tokens' lifetime: the time other
 * processes may still sign with it (above) plus clock skew between verifiers and us.
 */
const RETIRED_MARGIN_MS = 5 * 60_000;

export interface SigningKey {
  kid: string;
  alg: SigningAlg;
  /** The private key, for jose's signers only. */
  key: CryptoKey;
}

export type KeyState = 'active' | 'retired' | 'expired';

/** What `sleeve keys list` shows of a key: never its private part. */
export interface KeyInfo {
  kid: string;
  alg: SigningAlg;
  state: KeyState;
  createdAt: number;
  retiredAt: number | null;
  /** When it leaves the JWKS (null while active). */
  expiresAt: number | null;
}

const loadJose = () => import('jose');

export class SigningKeys {
  readonly #db: Db;
  readonly #clock: Clock;
  /** The active key per algorithm as this process last read it, and until when it trusts that. */
  readonly #active = new Map<SigningAlg, { key: SigningKey; until: number }>();

  constructor(db: Db, clock: Clock) {
    this.#db = db;
    this.#clock = clock;
  }

  /** Makes the active key of each algorithm that has none, and prunes expired keys. Safe to run in several processes at once. */
  async ensure(now = this.#clock.now()): Promise<void> {
    await this.prune(now);
    const active = await this.#db.selectFrom('signing_key').select('alg').where('active_alg', 'is not', null).execute();
    const missing = SIGNING_ALGS.filter((alg) => !active.some((r) => r.alg === alg));
    if (missing.length === 0) return;
    const rows = await Promise.all(missing.map((alg) => newKeyRow(alg, now)));
    await failpoint('signing-keys-made', missing.join(','));
    // Another process may have made one meanwhile: then the unique index keeps it, and this one is dropped.
    for (const row of rows) await this.#db.insertInto('signing_key').values(row).onConflict((oc) => oc.doNothing()).execute();
  }

  /** The key that signs with `alg` now (made first if there is none). */
  async activeKey(alg: SigningAlg): Promise<SigningKey> {
    const now = this.#clock.now();
    const cached = this.#active.get(alg);
    if (cached !== undefined && now < cached.until) return cached.key;
    let row = await this.#readActive(alg);
    if (row === undefined) {
      await this.ensure(now);
      row = await this.#readActive(alg);
      if (row === undefined) throw new Error(`no active ${alg} signing key`);
    }
    const key =
      cached?.key.kid === row.kid ? cached.key : { kid: row.kid, alg, key: (await (await loadJose()).importJWK(JSON.parse(row.private_jwk) as JWK, alg)) as CryptoKey };
    this.#active.set(alg, { key, until: now + ACTIVE_KEY_CACHE_MS });
    return key;
  }

  #readActive(alg: SigningAlg) {
    return this.#db.selectFrom('signing_key').select(['kid', 'private_jwk']).where('active_alg', '=', alg).executeTakeFirst();
  }

  /** The public keys a verifier may meet at `now`: the active ones, and the retired ones until their expiry. Newest first. */
  async publicJwks(now = this.#clock.now()): Promise<{ keys: JWK[] }> {
    const rows = await this.#db
      .selectFrom('signing_key')
      .select('public_jwk')
      .where((eb) => eb.or([eb('active_alg', 'is not', null), eb('expires_at', '>', now)]))
      .orderBy('created_at', 'desc')
      .orderBy('kid')
      .execute();
    return { keys: rows.map((r) => JSON.parse(r.public_jwk) as JWK) };
  }

  /**
   * Retires the active keys (they stay in the JWKS until the tokens they signed have
   * expired) and makes new ones; prunes expired keys. Returns the keys active afterwards
   * (another rotation at the same moment may have made them instead).
   */
  async rotate(now = this.#clock.now()): Promise<KeyInfo[]> {
    // Made before the transaction: an RSA key takes a while, and the lock should not.
    const rows = await Promise.all(SIGNING_ALGS.map((alg) => newKeyRow(alg, now)));
    await this.#db.transaction().execute(async (trx) => {
      for (const row of rows) {
        await trx
          .updateTable('signing_key')
          .set({ active_alg: null, retired_at: now, expires_at: now + MAX_SIGNED_LIFETIME_SECONDS * 1000 + RETIRED_MARGIN_MS })
          .where('active_alg', '=', row.alg)
          .execute();
        await trx.insertInto('signing_key').values(row).onConflict((oc) => oc.doNothing()).execute();
      }
    });
    this.#active.clear();
    await this.prune(now);
    return (await this.list(now)).filter((k) => k.state === 'active');
  }

  /** Removes the keys whose tokens have all expired; returns how many. */
  async prune(now = this.#clock.now()): Promise<number> {
    const r = await this.#db.deleteFrom('signing_key').where('expires_at', 'is not', null).where('expires_at', '<=', now).executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /** Every stored key, newest first, without its private part. */
  async list(now = this.#clock.now()): Promise<KeyInfo[]> {
    const rows = await this.#db
      .selectFrom('signing_key')
      .select(['kid', 'alg', 'active_alg', 'created_at', 'retired_at', 'expires_at'])
      .orderBy('created_at', 'desc')
      .orderBy('alg')
      .execute();
    return rows.map((r) => ({
      kid: r.kid,
      alg: r.alg,
      state: r.active_alg !== null ? 'active' : r.expires_at !== null && r.expires_at > now ? 'retired' : 'expired',
      createdAt: r.created_at,
      retiredAt: r.retired_at,
      expiresAt: r.expires_at,
    }));
  }
}

/** A new active key of `alg`: extractable (it is stored), its kid the RFC 7638 thumbprint of its public JWK. */
async function newKeyRow(alg: SigningAlg, now: number) {
  const jose = await loadJose();
  const pair = await jose.generateKeyPair(alg, { extractable: true });
  const publicJwk = await jose.exportJWK(pair.publicKey);
  const kid = await jose.calculateJwkThumbprint(publicJwk, 'sha256');
  const privateJwk = await jose.exportJWK(pair.privateKey);
  return {
    kid,
    alg,
    active_alg: alg,
    private_jwk: JSON.stringify({ ...privateJwk, kid, alg }),
    public_jwk: JSON.stringify({ ...publicJwk, kid, alg, use: 'sig' }),
    created_at: now,
    retired_at: null,
    expires_at: null,
  };
}
