/**
 * The authorization module's public surface: what the commands, the runtime and the bench
 * use. Its listener (buildAuthApp, and the TLS material it serves with) is app.ts: kept out
 * of here so that a command loads neither Fastify nor the certificate maker.
 */
export { accountRoles, addUser, findAccountByName, findAccount, setUserRole, ROLES, type Account, type AddUserInput, type Role } from './accounts.js';
export { checkClientId, registerApp, operatorEditApp, registeredRedirectUris, type Application, type Registered } from './applications.js';
export { audit, type AuditEvent, type AuditFields, type AuditLogger } from './audit.js';
export { PasswordHasher, DEFAULT_HASH_QUEUE, defaultHashThreads, type PasswordHashingLimits } from './crypto.js';
export type { AuthDeps } from './deps.js';
export { DPOP_ALGS } from './dpop.js';
export { ReplayStore, type ReplayLimits, type SharedReplay } from './replay-store.js';
export { exchangeCode, issueCode, type CodeRequest } from './grants/authorization-code.js';
export type { TokenResponse } from './grants/shared.js';
export { SigningKeys, type KeyInfo } from './signing-keys.js';
