/**
 * What any redirect URI must be, wherever it comes from: an application registered here
 * (applications.ts) or a client's metadata document (client-metadata.ts).
 */

/** Out-of-band: the code is shown on a page to copy instead of sent anywhere. */
export const OOB_URI = 'urn:ietf:wg:oauth:2.0:oob';

/** At most this many redirect URIs per application or document. */
export const MAX_REDIRECT_URIS = 10;

/**
 * Why `uri` cannot be a redirect target, or undefined when it can: a browser is sent to it
 * with parameters added, so it must parse as a URL (a port of 1–65535), and it must not
 * carry a fragment (which would swallow those parameters), a user name or password (which
 * make a URL say one host and go to another), spaces or control characters (which URL
 * parsers drop silently, so the target would not be the string compared).
 */
export function redirectUriProblem(uri: string): string | undefined {
  if (uri.length > 2000) return 'the redirect URL is too long';
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:[^\s]/.test(uri)) return `redirect URL ${JSON.stringify(uri)} is not an absolute URL`;
  if (/[\u0000-\u0020\u007f]/.test(uri)) return 'a redirect URL must not contain spaces or control characters (percent-encode them)';
  if (uri.includes('#')) return 'a redirect URL must not contain a fragment (#…)';
  const port = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/(?:[^/?@]*@)?(?:\[[^\]/?]*\]|[^:/?]*):(\d*)(?:[/?]|$)/.exec(uri)?.[1];
  if (port !== undefined && port !== '' && !(Number(port) >= 1 && Number(port) <= 65535)) return `the port of a redirect URL must be between 1 and 65535, not ${port}`;
  let parsed: URL;
  try {
    parsed = new URL(uri);
  } catch {
    return `redirect URL ${JSON.stringify(uri)} is not an absolute URL`;
  }
  if (parsed.username !== '' || parsed.password !== '') return 'a redirect URL must not contain a user name or password (…@)';
  return undefined;
}
