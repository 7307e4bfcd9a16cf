import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthDeps } from '../../deps.js';
import { authenticateClient } from '../../applications.js';
import { cookies, setCookie } from '../../http-util.js';
import type { ShownSecret } from '../../views/pages.js';
import type { SignedIn } from './shared.js';

/*
 * Post/Redirect/Get: every form post on the account pages answers 303, and what it did is
 * said once on the page it redirects to, by a flash cookie that page reads and clears. A
 * new client secret travels the same way (never in a URL): the cookie is Secure, HttpOnly,
 * SameSite=Strict and lives 5 minutes at most, names the user it is for, and the secret is
 * shown only while it is still the application's secret. So a reload repeats nothing and
 * shows the secret no more. See docs/decisions.md ("Account pages").
 */
const FLASH_COOKIE = '__Host-sleeve-flash';

export interface Flash {
  /** The account it is for. */
  a: number;
  /** The notice. */
  n: string;
  /** A new secret to show once, with its client_id. */
  c?: string;
  s?: string;
}

/** Answers 303 to `location` (a path of this site; the applications page unless given), which shows the flash once. */
export function redirectWithFlash(reply: FastifyReply, flash: Flash, location = '/account/applications'): FastifyReply {
  setCookie(reply, FLASH_COOKIE, Buffer.from(JSON.stringify(flash)).toString('base64url'), { maxAge: 300, sameSite: 'Strict' });
  return reply.redirect(location, 303);
}

/** Drops an unread flash (at sign-in and sign-out: a new secret does not outlive its session). */
export function clearFlash(reply: FastifyReply): void {
  setCookie(reply, FLASH_COOKIE, '', { maxAge: 0, sameSite: 'Strict' });
}

/** Reads and clears the flash, if it is for this user. */
export async function takeFlash(deps: AuthDeps, req: FastifyRequest, reply: FastifyReply, viewer: SignedIn): Promise<{ notice?: string; secret?: ShownSecret }> {
  const raw = cookies(req).get(FLASH_COOKIE);
  if (raw === undefined) return {};
  clearFlash(reply);
  let flash: Partial<Flash> | null;
  try {
    flash = raw.length <= 2000 ? (JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Partial<Flash> | null) : null;
  } catch {
    return {};
  }
  if (typeof flash !== 'object' || flash === null || flash.a !== viewer.accountId || typeof flash.n !== 'string') return {};
  const notice = flash.n.slice(0, 300);
  if (typeof flash.c !== 'string' || typeof flash.s !== 'string') return { notice };
  const app = await authenticateClient(deps, flash.c, flash.s);
  if (app === undefined || app.owner_id !== viewer.accountId) return { notice };
  return { notice, secret: { appName: app.name, clientId: app.client_id, secret: flash.s } };
}
