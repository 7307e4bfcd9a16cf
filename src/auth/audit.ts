/**
 * The audit trail: one JSON log line per security event, at info level, so it is on at the
 * default log level. Each line carries `audit` (the event name below) and the facts of the
 * event (who, from where, which application, why); never a password, secret, code or token.
 * An operator can keep just these lines with `jq 'select(.audit)'`.
 */

export type AuditEvent =
  | 'signin.succeeded'
  | 'signin.failed'
  | 'signout'
  | 'consent.given'
  | 'consent.denied'
  /** The user approved or denied a device's request on /oauth2/device (RFC 8628). */
  | 'device.approved'
  | 'device.denied'
  /** A user code entered on /oauth2/device was refused: `reason` unknown, expired, used or throttled. */
  | 'device.code_failed'
  | 'grant.revoked'
  /** An offline grant's access token revoked through /oauth2/revoke (its refresh token still works). */
  | 'token.revoked'
  | 'app.registered'
  | 'app.changed'
  | 'app.secret_reset'
  | 'app.removed'
  | 'user.created'
  /** A DPoP proof refused (bad signature, htm, htu, iat, ath, wrong key) or missing where required. */
  | 'dpop.rejected'
  /** A DPoP proof presented a second time (its jti seen before, in this process or, with Redis, any). */
  | 'dpop.replayed'
  /** A client metadata document refused (`reason`: private_address, redirect, client_id_mismatch, changed, timeout, too_large, not_json, …). */
  | 'client_document.refused'
  /** A user's role changed (`reason`: the new role, editor or approver). */
  | 'user.role_changed';

/** The facts an audit line may carry. Anything else is left out, so nothing secret slips in. */
export interface AuditFields {
  /** The user name the event is about (as typed, for a failed sign-in). */
  user?: string | undefined;
  /** The client's address (after trusted proxies). */
  address?: string | undefined;
  /** The application's client_id. */
  clientId?: string | undefined;
  /** Why it happened or failed: a short fixed word such as `bad_password` or `throttled`. */
  reason?: string | undefined;
  /** Scopes granted or asked for. */
  scope?: string | undefined;
  /** Where the event came from when it is not a web request, e.g. `cli`. */
  via?: string | undefined;
}

export interface AuditLogger {
  info(obj: object, msg: string): void;
}

const KEYS: readonly (keyof AuditFields)[] = ['user', 'address', 'clientId', 'reason', 'scope', 'via'];

/** The object an audit line logs: the event and the known fields that are set. */
function auditRecord(event: AuditEvent, fields: AuditFields): Record<string, string> {
  const out: Record<string, string> = { audit: event };
  for (const key of KEYS) {
    const value = fields[key];
    // User names and reasons come from clients: bounded, so a log line stays a line.
    if (value !== undefined) out[key] = value.length > 200 ? `${value.slice(0, 200)}…` : value;
  }
  return out;
}

/** Logs one security event. */
export function audit(log: AuditLogger, event: AuditEvent, fields: AuditFields = {}): void {
  log.info(auditRecord(event, fields), 'audit');
}
