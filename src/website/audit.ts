import type { FastifyRequest } from 'fastify';

/*
 * Curation events as audit lines: who changed which cover art, from where and how, in the
 * format of the authorization module's security events (src/auth/audit.ts): one JSON line at
 * info level carrying `audit` (the event) and the facts, never a token or a cookie, so that
 * `jq 'select(.audit)'` keeps both kinds.
 */

export type CurationEvent =
  | 'cover_art.added'
  | 'cover_art.edited'
  | 'cover_art.removed'
  | 'cover_art.reordered'
  | 'cover_art.group_cover_set'
  /** A pending edit approved, rejected or withdrawn (`reason`: the verb). */
  | 'cover_art.edit_approved'
  | 'cover_art.edit_rejected'
  /** Closing an edit refused before the domain was asked: not an approver, or one's own edit. */
  | 'cover_art.edit_refused';

export interface CurationFields {
  /** The editor's account name and id. */
  user: string;
  account: number;
  /** The client's address (after trusted proxies). */
  address?: string | undefined;
  /** The application, for a change through the write API. */
  clientId?: string | undefined;
  /** `page` (the website's forms) or `api` (the write API). */
  via: 'page' | 'api';
  release?: string | undefined;
  releaseGroup?: string | undefined;
  /** An event's MBID, for a change of the Event Art Archive's images. */
  event?: string | undefined;
  image?: string | number | undefined;
  edit?: number | undefined;
  /** A short fixed word: the verb of a closing, the reason of a refusal. */
  reason?: string | undefined;
}

/** The object a curation audit line logs: the event and the fields that are set (texts bounded). */
function curationRecord(event: CurationEvent, fields: CurationFields): Record<string, string | number> {
  const out: Record<string, string | number> = { audit: event };
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    out[key] = typeof value === 'string' && value.length > 200 ? `${value.slice(0, 200)}…` : value;
  }
  return out;
}

/** Logs one curation event with the request's logger (its request id comes with it). */
export function auditCuration(req: Pick<FastifyRequest, 'log'>, event: CurationEvent, fields: CurationFields): void {
  req.log.info(curationRecord(event, fields), 'audit');
}
