import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { audit } from '../../audit.js';
import { decideDevice, decisionOf, DEVICE_PAGE, findByUserCode, type PendingDevice, type UserCodeRefusal } from '../../device.js';
import { csrfValid, formParams, queryParams } from '../../http-util.js';
import { scopeNames } from '../../scopes.js';
import { deviceConsentPage, deviceDonePage, deviceEntryPage } from '../../views/device.js';
import { EXPIRED, requireViewer, sendPage, type PageContext, type SignedIn } from './shared.js';

const REFUSALS: Record<Exclude<UserCodeRefusal['refused'], 'throttled'>, string> = {
  malformed: 'A code has 8 letters, such as BCDF-GHJK. Check the code your device shows.',
  unknown: 'There is no such code. Check the code your device shows and try again.',
  expired: 'This code has expired. Start again on your device to get a new one.',
  used: 'This code has already been used. Start again on your device to get a new one.',
};

/**
 * The device page (RFC 8628 §3.3): a signed-in user enters the code a device shows (a GET
 * form, and the device's verification_uri_complete carries it too), sees the consent page, and
 * approves or denies it (a POST, answered 303 to a page that says what was decided). Signed-out
 * users are sent to sign in and come back. Every lookup of a code is throttled (auth/device.ts).
 */
export function devicePages(app: FastifyInstance, ctx: PageContext): void {
  app.get(DEVICE_PAGE, async function devicePage(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    const q = queryParams(req);
    const done = Number(q.get('done'));
    if (Number.isSafeInteger(done) && done > 0) {
      const decided = await decisionOf(ctx.deps, done, viewer.accountId);
      if (decided !== undefined) return sendPage(reply, 200, deviceDonePage({ viewer, appName: decided.appName, approved: decided.decision === 'approved' }));
    }
    const typed = q.get('user_code');
    if (typed === null) return sendPage(reply, 200, deviceEntryPage({ viewer }));
    const found = await lookUp(ctx, req, reply, viewer, typed);
    if ('refused' in found) return found.refused;
    return sendConsent(reply, viewer, found, 200);
  });

  app.post(DEVICE_PAGE, async function deviceDecision(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    const form = formParams(req);
    const typed = form.get('user_code') ?? queryParams(req).get('user_code') ?? '';
    // The CSRF token first: a forged post must not spend one of the address's throttled lookups.
    if (!csrfValid(req)) return sendPage(reply, 400, deviceEntryPage({ viewer, userCode: typed.slice(0, 20), error: EXPIRED }));
    const found = await lookUp(ctx, req, reply, viewer, typed);
    if ('refused' in found) return found.refused;
    const decision = form.get('decision');
    if (decision !== 'allow' && decision !== 'deny') return sendConsent(reply, viewer, found, 400, 'Choose "Allow access" or "No thanks".');
    const approved = decision === 'allow';
    if (!(await decideDevice(ctx.deps, found.id, approved ? 'approved' : 'denied', viewer))) {
      return sendPage(reply, 400, deviceEntryPage({ viewer, userCode: found.userCode, error: REFUSALS.used }));
    }
    const facts = { user: viewer.name, address: ctx.clientAddress(req), clientId: found.app.client_id, scope: scopeNames(found.scope).join(' '), via: 'oauth2/device' };
    audit(req.log, approved ? 'device.approved' : 'device.denied', facts);
    return reply.redirect(`${DEVICE_PAGE}?done=${found.id}`, 303);
  });
}

/** The pending request of a typed code, or the entry form again saying why not (429 with Retry-After when throttled). */
async function lookUp(ctx: PageContext, req: FastifyRequest, reply: FastifyReply, viewer: SignedIn, typed: string): Promise<PendingDevice | { refused: FastifyReply }> {
  const address = ctx.clientAddress(req);
  const found = await findByUserCode(ctx.deps, typed, address, viewer.accountId);
  if (!('refused' in found)) return found;
  const userCode = typed.slice(0, 20);
  if (found.refused !== 'malformed') audit(req.log, 'device.code_failed', { user: viewer.name, address, reason: found.refused });
  if (found.refused === 'throttled') {
    reply.header('retry-after', String(found.retryAfterSeconds));
    const error = `Too many wrong codes were entered. Try again in ${Math.ceil(found.retryAfterSeconds / 60)} minute(s).`;
    return { refused: sendPage(reply, 429, deviceEntryPage({ viewer, userCode, error })) };
  }
  return { refused: sendPage(reply, 400, deviceEntryPage({ viewer, userCode, error: REFUSALS[found.refused] })) };
}

/** The device consent (views/device.ts), which warns against device code phishing and says the access lasts until revoked. */
function sendConsent(reply: FastifyReply, viewer: SignedIn, found: PendingDevice, status: number, error?: string): FastifyReply {
  return sendPage(reply, status, deviceConsentPage({ viewer, app: found.app, scope: found.scope, userCode: found.userCode, error }));
}
