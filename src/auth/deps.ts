import type { Db } from '../db/schema.js';
import type { WriteBatcher } from '../db/write-batch.js';
import type { Clock } from '../shared/clock.js';
import type { ClientDocuments } from './client-metadata.js';
import type { PasswordHasher } from './crypto.js';
import type { ReplayStore } from './replay-store.js';
import type { SigningKeys } from './signing-keys.js';

/** What the authorization module needs from the outside world (runtime.ts makes it; serve() adds the write batcher and the hashing threads). */
export interface AuthDeps {
  db: Db;
  clock: Clock;
  /** {auth_url}: public URL of the authorization service. */
  authUrl: string;
  accessTokenTtl: number;
  authCodeTtl: number;
  /** Rotating applications: how long a used refresh token, presented again, gets the same answer (auth/grants/refresh-token.ts), seconds. */
  refreshGraceSeconds: number;
  /** 's256-for-public': public applications must send a PKCE S256 challenge (SLEEVE_PKCE). */
  pkce: 'optional' | 's256-for-public';
  /** Group commit for the hot small writes (code exchange, token refresh), when the process serves many clients. */
  writes?: WriteBatcher;
  /** Where passwords are hashed (worker threads with a bounded queue); a shared default when absent. */
  passwords?: PasswordHasher | undefined;
  /** The id_token signing keys (auth/signing-keys.ts). */
  signingKeys: SigningKeys;
  /** The DPoP proofs' jti seen (auth/replay-store.ts); serve() gives one that shares them through Redis when configured. */
  dpopReplay?: ReplayStore | undefined;
  /** Client ID Metadata Documents (auth/client-metadata.ts): their fetches and cache; absent, a URL client_id is an unknown client. */
  clientDocuments?: ClientDocuments | undefined;
}

