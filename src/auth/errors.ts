/** RFC 6749/7009/6750 error codes sleeve answers with. */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_response_type'
  | 'invalid_scope'
  | 'access_denied'
  /** RFC 8628 §3.5: the device polls, and the user has not decided yet; or polls too fast; or came too late. */
  | 'authorization_pending'
  | 'slow_down'
  | 'expired_token'
  | 'invalid_token'
  | 'insufficient_scope'
  | 'server_error'
  | 'temporarily_unavailable'
  /** RFC 9449: a DPoP proof that is missing where required, malformed, or fails a check. */
  | 'invalid_dpop_proof'
  /** OpenID Connect Core §3.1.2.6: prompt=none, and a page would be needed. */
  | 'login_required'
  | 'consent_required'
  | 'interaction_required'
  /** OpenID Connect Core §3.1.2.6: request objects and dynamic registration are not supported. */
  | 'request_not_supported'
  | 'request_uri_not_supported'
  | 'registration_not_supported';

/** An OAuth protocol error: the wire code, the description shown, and the HTTP status. */
export class OAuthError extends Error {
  readonly error: OAuthErrorCode;
  readonly status: number;
  /** A 503's Retry-After (seconds), when it says one. */
  readonly retryAfterSeconds?: number;

  constructor(error: OAuthErrorCode, description: string, status?: number) {
    super(description);
    this.name = 'OAuthError';
    this.error = error;
    this.status = status ?? (error === 'invalid_client' ? 401 : error === 'temporarily_unavailable' ? 503 : error === 'server_error' ? 500 : 400);
  }
}

export const HTTPS_ONLY = 'Invalid protocol, only HTTPS is allowed';

/** The OAuth error of a request refused with a 4xx status before its endpoint read it (a body too large, one that cannot be parsed). */
export function refusedRequest(status: number): OAuthError {
  return new OAuthError('invalid_request', status === 413 ? 'The request body is too large' : 'The request could not be understood', status);
}

/** The OAuth error of a request that failed (and was logged). */
export function failedRequest(): OAuthError {
  return new OAuthError('server_error', 'Something went wrong; try again later');
}
