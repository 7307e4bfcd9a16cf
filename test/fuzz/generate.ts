/*
 * Request generators for the fuzz test: every request comes from its own PRNG, seeded
 * from the run's seed and the request's index, so any one of them can be made again
 * alone (SLEEVE_FUZZ_SEED, SLEEVE_FUZZ_ONLY) whatever the concurrency of the run.
 */
import { mulberry32 } from '../../datagen/prng.js';

export class Rng {
  private readonly next: () => number;

  constructor(seed: number) {
    this.next = mulberry32(seed);
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return this.next() % n;
  }

  /** An integer in [lo, hi]. */
  between(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  chance(p: number): boolean {
    return this.next() / 0x1_0000_0000 < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }

  /** Chars of `alphabet`, `n` of them. */
  text(n: number, alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789'): string {
    let out = '';
    for (let i = 0; i < n; i++) out += alphabet[this.int(alphabet.length)];
    return out;
  }

  bytes(n: number): Buffer {
    const out = Buffer.alloc(n);
    for (let i = 0; i < n; i++) out[i] = this.int(256);
    return out;
  }
}

/** The PRNG of request `index` in the run seeded `seed`. */
export function requestRng(seed: number, index: number): Rng {
  return new Rng((Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 1, 0xc2b2ae35)) >>> 0);
}

/** A generated request. Strings are sent as latin1, so a char of U+0080..U+00FF is one raw (non-UTF-8) byte. */
export interface FuzzRequest {
  method: string;
  target: string;
  version: string;
  headers: [string, string][];
  body: Buffer;
  /** How the body is framed: an honest Content-Length, chunked, none, or a Content-Length that lies. */
  framing: 'length' | 'chunked' | 'none' | 'short' | 'long';
  /** Whether the request may leave the connection in a state a keep-alive client cannot reuse: sent on a connection of its own. */
  alone: boolean;
}

/** The bytes on the wire. */
export function encode(req: FuzzRequest): Buffer {
  const lines = [`${req.method} ${req.target} ${req.version}`];
  for (const [k, v] of req.headers) lines.push(`${k}: ${v}`);
  let body = req.body;
  if (req.framing === 'length') lines.push(`Content-Length: ${body.length}`);
  if (req.framing === 'short') lines.push(`Content-Length: ${Math.max(0, body.length - 1 - (body.length >> 1))}`);
  if (req.framing === 'long') lines.push(`Content-Length: ${body.length + 1 + (body.length >> 1)}`);
  if (req.framing === 'chunked') {
    lines.push('Transfer-Encoding: chunked');
    const parts: Buffer[] = [];
    for (let at = 0; at < body.length; at += 1000) {
      const piece = body.subarray(at, at + 1000);
      parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`, 'latin1'), piece, Buffer.from('\r\n'));
    }
    parts.push(Buffer.from('0\r\n\r\n'));
    body = Buffer.concat(parts);
  }
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body]);
}

/** The request as a JS string literal (bodies cut), for a failure message that can be pasted into a raw socket. */
export function describe(req: FuzzRequest): string {
  const bytes = encode(req);
  const text = bytes.toString('latin1');
  return text.length > 1500 ? `${JSON.stringify(text.slice(0, 1500))} … (${bytes.length} bytes in all)` : JSON.stringify(text);
}

/** Whether the bytes make a request line and headers that a keep-alive connection can carry (no byte that breaks framing). */
function wellFormed(req: FuzzRequest): boolean {
  const token = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
  if (!token.test(req.method) || req.version !== 'HTTP/1.1' && req.version !== 'HTTP/1.0') return false;
  if (/[\x00-\x20\x7f]/.test(req.target)) return false;
  return req.headers.every(([k, v]) => token.test(k) && !/[\x00-\x08\x0a-\x1f\x7f]/.test(v) && v.length < 8000);
}

// ---------------------------------------------------------------------------------------
// Shared pieces

const METHODS = ['GET', 'GET', 'GET', 'GET', 'HEAD', 'POST', 'POST', 'OPTIONS', 'PUT', 'DELETE', 'PATCH', 'TRACE', 'PROPFIND', 'SEARCH', 'BREW', 'get', 'M-SEARCH', 'LINK', 'QUERY'];
const ODD_METHODS = ['CONNECT', 'G(T', 'GE T', '', 'GET\x00', 'PRI', 'X'.repeat(300), 'ÄGET'];
const CONTROL = '\x00\x01\x07\x08\x09\x0a\x0b\x0c\x0d\x1b\x1f\x7f';

/** A string of random chars from a mixed bag: ASCII, specials, latin1 (raw non-UTF-8 bytes) and, rarely, controls. */
function oddText(r: Rng, n: number, controls = false): string {
  const pools = ['abcXYZ019-_.~', 'abcXYZ019-_.~', "!$&'()*+,;=:@/?#[]%\"<>\\^`{|} ", r.chance(0.1) ? '\x80\xa0\xbf\xc0\xc3\xe9\xf0\xff' : 'xyz', controls ? CONTROL : ''];
  let out = '';
  for (let i = 0; i < n; i++) {
    const pool = pools[r.int(controls ? 5 : 4)] as string;
    out += pool[r.int(pool.length)] ?? 'x';
  }
  return out;
}

/** Percent-encodings, odd and not: valid, lower case, truncated, non-hex, overlong UTF-8, NUL, encoded dots and slashes. */
const ESCAPES = ['%20', '%2e', '%2E', '%2f', '%2F', '%5c', '%00', '%0a', '%0d%0a', '%25', '%', '%4', '%zz', '%c0%af', '%c0%ae', '%e0%80%af', '%ff', '%fe%ff', '%ed%a0%80', '%f4%90%80%80', '%u002e', '%%32%65', '%C3%A9', '%e2%82%ac', '%7f', '%3f', '%23'];

/** Mangles one path: inserted dot segments, doubled slashes, escapes, raw bytes. */
function mangle(r: Rng, path: string): string {
  let p = path;
  const edits = r.int(4);
  for (let i = 0; i < edits; i++) {
    const at = r.int(p.length + 1);
    const piece = r.pick(['/./', '/../', '/..', '//', '/.', '..', r.pick(ESCAPES), r.pick(ESCAPES), oddText(r, r.between(1, 3)), ';x=1', '?', '#frag', '\\', '\xc3\xa9']);
    p = p.slice(0, at) + piece + p.slice(at);
  }
  return p;
}

function query(r: Rng): string {
  if (r.chance(0.6)) return '';
  const parts: string[] = [];
  const n = r.chance(0.05) ? r.between(50, 400) : r.between(0, 4);
  for (let i = 0; i < n; i++) {
    const k = r.chance(0.7) ? r.pick(['a', 'q', 'size', 'fmt', 'callback', 'json', 'code', 'state', 'x[]', '']) : oddText(r, r.between(1, 6));
    const v = r.chance(0.05) ? 'v'.repeat(r.between(1000, 6000)) : r.chance(0.5) ? r.pick(ESCAPES) : oddText(r, r.between(0, 10));
    parts.push(r.chance(0.1) ? k : `${r.chance(0.95) ? encodeURIComponent(k) : k}=${r.chance(0.8) ? encodeURIComponent(v) : v}`);
  }
  return `?${parts.join(r.chance(0.9) ? '&' : ';')}`;
}

const ACCEPTS = ['application/json', '*/*', 'text/html', 'application/json;q=0', 'application/*', 'text/html, application/json;q=0.9', 'image/*', 'application/json; charset=utf-8', ';;;', 'application/json;q=abc', ''];
const ETAG_GUESSES = ['*', 'W/"x"', '"abc"', '"', 'W/', '"a", "b", *', 'garbage', '""'];
const RANGES = ['bytes=0-10', 'bytes=-5', 'bytes=5-', 'bytes=0-0,2-3', 'bytes=10-5', 'bytes=99999999999999999999-', 'bytes=-0', 'bytes=0-99999999999', 'bytes=', 'items=0-1', 'bytes=a-b', 'bytes=0-1,0-1,0-1,0-1,0-1,0-1,0-1,0-1', 'bytes = 0 - 1', 'bytes=-99999999999999999999999'];
const DATES = ['Tue, 24 Nov 2026 09:00:00 GMT', 'Thu, 01 Jan 1970 00:00:00 GMT', 'Fri, 31 Dec 9999 23:59:59 GMT', 'yesterday', '0', '-1', 'Mon, 32 Foo 2026 99:99:99 GMT'];
const FORWARDED_FOR = ['1.2.3.4', '::1', '1.2.3.4, 5.6.7.8', 'unknown', '999.999.999.999', '[::1]:80', '', ',,,', 'a'.repeat(300), '127.0.0.1, ::ffff:10.0.0.1'];
const CONTENT_TYPES = [
  'application/x-www-form-urlencoded',
  'application/x-www-form-urlencoded; charset=utf-8',
  'application/x-www-form-urlencoded; charset=latin1',
  'APPLICATION/X-WWW-FORM-URLENCODED',
  'application/json',
  'multipart/form-data; boundary=x',
  'text/plain',
  'application/octet-stream',
  ';',
  'x/y; a="b',
  'application/x-www-form-urlencoded, application/json',
];

/** Common headers: Accept, conditionals, ranges, forwarding, cookies, authorization, ids, odd names and values. */
function commonHeaders(r: Rng, h: [string, string][], extra: { etags: string[]; authorizations: string[] }): void {
  if (r.chance(0.97)) h.push(['Host', r.chance(0.97) ? '127.0.0.1' : r.pick(['', 'evil.example', 'a'.repeat(500), '[::1', 'x:99999', '\xe9'])]);
  if (r.chance(0.03)) h.push(['Host', 'second.example']);
  if (r.chance(0.5)) h.push(['Accept', r.pick(ACCEPTS)]);
  if (r.chance(0.15)) h.push(['If-None-Match', r.chance(0.5) && extra.etags.length > 0 ? r.pick(extra.etags) : r.pick(ETAG_GUESSES)]);
  if (r.chance(0.1)) h.push(['If-Modified-Since', r.pick(DATES)]);
  if (r.chance(0.15)) h.push(['Range', r.pick(RANGES)]);
  if (r.chance(0.05)) h.push(['If-Range', r.pick([...ETAG_GUESSES, ...DATES, ...extra.etags])]);
  if (r.chance(0.1)) h.push(['X-Forwarded-For', r.pick(FORWARDED_FOR)]);
  if (r.chance(0.1)) h.push(['X-Forwarded-Proto', r.pick(['https', 'http', 'https, http', 'ftp', '', 'HTTPS'])]);
  if (r.chance(0.05)) h.push(['X-Forwarded-Host', r.pick(['evil.example', '', 'a, b'])]);
  if (r.chance(0.05)) h.push(['Forwarded', r.pick(['for=1.2.3.4;proto=https', 'garbage', 'for="[::1]"'])]);
  if (r.chance(0.05)) h.push(['X-Request-Id', r.pick(['abc', '', 'x'.repeat(2000), '\xff\xfe', '"; DROP'])]);
  if (r.chance(0.05)) h.push(['Cookie', r.pick(['a=b', '=', ';;;', '__Host-sleeve-session=', `x=${'y'.repeat(4000)}`, Array.from({ length: 200 }, (_, i) => `c${i}=${i}`).join('; '), '\xe9=\xff'])]);
  if (r.chance(0.2) && extra.authorizations.length > 0) h.push(['Authorization', r.pick(extra.authorizations)]);
  if (r.chance(0.05)) h.push(['Authorization', r.pick(['Basic', 'Basic !!!', 'Basic Og==', 'Basic ' + Buffer.from('\xff:\xfe', 'latin1').toString('base64'), 'Bearer', 'Bearer a b', 'Digest x', 'Basic ' + Buffer.from('%zz:%', 'latin1').toString('base64'), 'Bearer ' + 'A'.repeat(5000)])]);
  if (r.chance(0.03)) h.push(['Expect', r.pick(['100-continue', 'garbage'])]);
  if (r.chance(0.05)) h.push(['Connection', r.pick(['close', 'keep-alive', 'upgrade', 'Upgrade, HTTP2-Settings', 'te'])]);
  if (r.chance(0.03)) h.push(['Upgrade', r.pick(['websocket', 'h2c', 'garbage'])]);
  if (r.chance(0.03)) h.push(['Accept-Encoding', r.pick(['gzip', 'br;q=2', '*', 'identity;q=0'])]);
  if (r.chance(0.05)) h.push([r.pick(['X-Odd', 'x_under_score', 'A'.repeat(200), 'Te', 'Trailer', 'Max-Forwards']), oddText(r, r.between(0, 40))]);
  if (r.chance(0.02)) for (let i = 0; i < r.between(50, 150); i++) h.push([`X-Many-${i}`, String(i)]);
  if (r.chance(0.01)) h.push(['X-Huge', 'h'.repeat(r.between(8000, 20000))]);
  if (r.chance(0.02)) h.push([r.pick(['Bad Name', 'Bad:Name', 'Bäd', '', 'X-Ctl\x01']), 'v']);
  if (r.chance(0.02)) h.push(['X-Control', `a${r.pick(CONTROL.split(''))}b`]);
}

function body(r: Rng, h: [string, string][], fields: () => [string, string][]): Buffer {
  const kind = r.int(10);
  if (kind < 6) {
    if (r.chance(0.9)) h.push(['Content-Type', r.chance(0.85) ? 'application/x-www-form-urlencoded' : r.pick(CONTENT_TYPES)]);
    const f = fields();
    if (r.chance(0.1)) for (let i = 0; i < r.between(1, 300); i++) f.push([r.pick(['a', 'client_id', 'token', 'name']), oddText(r, 5)]);
    if (r.chance(0.03)) f.push(['huge', 'z'.repeat(r.between(10_000, 80_000))]);
    const encoded = f.map(([k, v]) => (r.chance(0.05) ? `${k}=${v}` : `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)).join('&');
    return Buffer.from(r.chance(0.05) ? encoded + r.pick(ESCAPES) + '&&=&' : encoded, r.chance(0.5) ? 'utf8' : 'latin1');
  }
  if (kind < 8) {
    h.push(['Content-Type', r.pick(['application/json', 'application/json; charset=utf-8', 'text/json'])]);
    return Buffer.from(r.pick(['{}', '[]', 'null', '{"a":', '{"client_id":"x","token":1}', '"\ud800"', JSON.stringify({ deep: Array.from({ length: 200 }, () => ({})) }), '{"__proto__":{"x":1}}']));
  }
  if (kind < 9) {
    if (r.chance(0.7)) h.push(['Content-Type', r.pick(CONTENT_TYPES)]);
    return r.bytes(r.chance(0.05) ? r.between(60_000, 100_000) : r.between(1, 2000));
  }
  return Buffer.alloc(0);
}

/** Method, version, framing and the odd, hand-broken request. */
function finish(r: Rng, req: Omit<FuzzRequest, 'alone' | 'framing' | 'version' | 'method'> & { method?: string }, hasBody: boolean): FuzzRequest {
  const method = req.method ?? (r.chance(0.02) ? r.pick(ODD_METHODS) : r.pick(METHODS));
  const version = r.chance(0.95) ? 'HTTP/1.1' : r.pick(['HTTP/1.0', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/0.9', 'HTTP/1.1x', 'http/1.1', '']);
  let framing: FuzzRequest['framing'] = hasBody || req.body.length > 0 ? (r.chance(0.1) ? 'chunked' : 'length') : 'none';
  if (req.body.length > 1 && r.chance(0.03)) framing = r.pick(['short', 'long'] as const);
  const out: FuzzRequest = { ...req, method, version, framing, alone: false };
  if (r.chance(0.01)) out.target = r.pick(['*', 'http://127.0.0.1/', '127.0.0.1:80', '', '//', 'http://[::1', '/\x00', 'a b c']);
  // A refused request (past Node's 16 KiB of head, a malformed head before a large body) is
  // answered and the connection closed at once: a client still sending may get a reset before
  // it reads the answer. Such requests may go unanswered.
  const headBytes = out.target.length + out.headers.reduce((n, [k, v]) => n + k.length + v.length + 4, 0);
  const large = headBytes > 16_000 || (headBytes + out.body.length > 16_000 && !wellFormed(out));
  // Requests Node 20 treats specially, each on a connection of its own:
  // - CONNECT: Node closes the connection of a CONNECT it has no handler for, without an answer;
  // - Upgrade: after a request that asked to upgrade (answered as a plain request), a malformed
  //   request on the same connection is neither answered nor closed until the headers timeout;
  // - PRI (the HTTP/2 preface) as the second request of a connection: the same, where as the
  //   first it is answered 400 at once.
  const odd = ['CONNECT', 'PRI'].includes(method.toUpperCase()) || out.headers.some(([k]) => /^upgrade$/i.test(k));
  out.alone = odd || large || framing === 'short' || framing === 'long' || !wellFormed(out);
  return out;
}

/** Randomly puts raw bytes, NUL and controls into a path (such requests go on their own connection). */
function rawBytes(r: Rng, path: string): string {
  if (!r.chance(0.04)) return path;
  const at = r.int(path.length + 1);
  return path.slice(0, at) + oddText(r, r.between(1, 4), true) + path.slice(at);
}

function longPath(r: Rng, base: string): string {
  return `${base}/${r.pick(['a', '%2e', '../', 'x/'])}`.repeat(r.between(100, r.chance(0.2) ? 6000 : 1500));
}

function mbidVariant(r: Rng, known: string[]): string {
  const valid = r.pick(known);
  switch (r.int(20)) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 14:
    case 15:
    case 16:
    case 17:
    case 18:
    case 19:
      return valid;
    case 4:
      return 'xxxxxxxx-xxxx-4xxx-8xxx-xxxxxxxxxxxx'.replace(/x/g, () => r.text(1, '0123456789abcdef'));
    case 5:
      return valid.toUpperCase();
    case 6:
      return valid.replace(/-/g, '');
    case 7:
      return valid.slice(0, r.int(36));
    case 8:
      return valid + oddText(r, r.between(1, 3));
    case 9:
      return valid.replace(/-/g, () => r.pick(['%2d', '%2D', '-', '_']));
    case 10:
      return valid.replace(/[0-9a-f]/, () => r.pick(['g', 'Z', '%00', '\xe9', '%c3%a9']));
    case 11:
      return r.pick(['', '.', '..', '%2e%2e', '0', 'null', 'mbid-' + valid, '00000000-0000-0000-0000-000000000000']);
    case 12:
      return `{${valid}}`;
    default:
      return oddText(r, r.between(1, 50));
  }
}

// ---------------------------------------------------------------------------------------
// The cover art listener

export interface CoverArtWorld {
  /** Releases and groups the catalogue knows (some with art). */
  releases: string[];
  groups: string[];
  /** Real image ids. */
  imageIds: string[];
  /** Real /download/ keys (originals, thumbnails, index.json). */
  files: string[];
  etags: string[];
}

const FILENAMES = ['front', 'back', 'front-250', 'front-500', 'front-1200', 'back-250', 'front-small', 'front-large', 'frontx', 'front-', 'front-99', 'front.jpg', 'index.json', '', '-250', 'FRONT', 'front-250-500', 'front/', 'front?x'];

export function coverArtRequest(r: Rng, w: CoverArtWorld): FuzzRequest {
  const h: [string, string][] = [];
  let path: string;
  const kind = r.int(20);
  if (kind < 9) {
    const entity = r.chance(0.9) ? r.pick(['release', 'release', 'release-group']) : r.pick(['releases', 'RELEASE', 'release_group', 'api', 'robots.txt', '*', '', 'download', '%72elease', 'release%00']);
    const mbid = mbidVariant(r, entity === 'release-group' ? w.groups : w.releases);
    const fileName = r.chance(0.35) ? '' : r.chance(0.5) ? r.pick(FILENAMES) : r.chance(0.7) ? `${r.pick(w.imageIds)}${r.pick(['', '-250', '-500', '-1200', '-100', '.jpg', '-250.jpg', 'x'])}` : r.pick(['0', '-1', '9'.repeat(r.between(10, 40)), '1e5', '0x10', ' 1', '１２３']);
    path = `/${entity}/${mbid}/${fileName}`;
    if (r.chance(0.3)) path = path.replace(/\/$/, '');
    if (r.chance(0.05)) path += `/${oddText(r, 5)}`;
  } else if (kind < 15) {
    const file = r.pick(w.files);
    path = `/download/${r.chance(0.6) ? file : r.pick([file.replace('mbid-', ''), file.replace(/\.(jpg|png|gif|json)$/, ''), file.toUpperCase(), `${file}/`, `../${file}`, `${file.split('/')[0]}/../${file}`, `${file.split('/')[0]}%2f${file.split('/')[1]}`, `%2e%2e/${file}`, `..%2f..%2fetc%2fpasswd`, '../../../../etc/passwd', '....//....//etc/passwd', `.${file}`, `${file}.bak`, `${file}%00.jpg`, `${file}\x00`, 'mbid-x/', '', '.', '/', 'sleeve.db', 'files/notes.txt', `${file}?download=1`])}`;
  } else if (kind < 17) {
    path = r.pick(['/', '/robots.txt', '/api', '/api/', '/healthz', '/readyz', '/metrics', '/favicon.ico', '/index.html', '/release', '/release/', '/release-group', '/.well-known/security.txt', '/download', '/download/']);
  } else if (kind < 18) {
    path = longPath(r, r.pick(['/release', '/download', '']));
  } else {
    path = `/${oddText(r, r.between(1, 60))}`;
  }
  if (r.chance(0.15)) path = mangle(r, path);
  path = rawBytes(r, path.replace(/ /g, r.chance(0.9) ? '%20' : ' '));
  commonHeaders(r, h, { etags: w.etags, authorizations: [] });
  const hasBody = r.chance(0.15);
  const b = hasBody ? body(r, h, () => [['a', oddText(r, 5)]]) : Buffer.alloc(0);
  return finish(r, { target: path + query(r), headers: h, body: b }, hasBody);
}

// ---------------------------------------------------------------------------------------
// The auth listener

export interface AuthWorld {
  user: string;
  password: string;
  /** A session cookie value and a CSRF cookie value that are valid, for requests that cannot end the session. */
  session: string;
  /** A session that requests which may end it (logout, sign-in) carry. */
  spareSession: string;
  csrf: string;
  /** Clients (confidential and public) with their secrets and registered redirect URIs. */
  clients: { id: string; secret: string; redirectUri: string | undefined; kind: 'confidential' | 'public' }[];
  accessToken: string;
  refreshToken: string;
  /** Application ids the fuzz may edit but must not remove (its own clients). */
  appIds: number[];
}

/*
 * Two inputs that once answered 500, generated on purpose: a loopback redirect URI with a port
 * over 65535 at /oauth2/authorize (allow, deny, bad scope), and a return_to holding a character
 * above U+00FF or DEL at /login (it reached a Location header).
 */

const SCOPES = ['profile', 'email', 'tag', 'rating', 'collection', 'submit_isrc', 'submit_barcode', 'profile email', 'profile  email', 'PROFILE', 'openid', '', 'profile,email', 'profile\u00e9', 'profile%20email'];

function redirectUri(r: Rng, w: AuthWorld): string {
  const registered = w.clients.map((c) => c.redirectUri).filter((u): u is string => u !== undefined);
  const ports = ['', ':0', ':80', ':8080', ':65535', ':65536', ':99999', ':-1', ':abc', ':'];
  switch (r.int(6)) {
    case 0:
    case 1:
      return r.pick(registered);
    case 2:
      return 'urn:ietf:wg:oauth:2.0:oob';
    case 3:
      return `http://${r.pick(['127.0.0.1', 'localhost', '[::1]', '127.0.0.2'])}${r.pick(ports)}/${r.pick(['cb', '', 'x?y=1', 'a#b', '%zz'])}`;
    case 4:
      return r.pick(registered) + r.pick(['/', '?x=1', '#', '%2e%2e', '\xe9']);
    default:
      return r.pick(['javascript:alert(1)', 'data:text/html,x', 'http://evil.example/cb', '//evil.example', '', 'not a uri', 'http://', 'http://[::1/', 'https://a'.repeat(200)]);
  }
}

function clientId(r: Rng, w: AuthWorld): string {
  return r.chance(0.7) ? r.pick(w.clients).id : r.pick(['', 'x', 'A'.repeat(300), '%00', '\u0000', '\xe9', r.pick(w.clients).id + 'x', r.pick(w.clients).id.toUpperCase()]);
}

function clientSecret(r: Rng, w: AuthWorld, id: string): string {
  const own = w.clients.find((c) => c.id === id)?.secret;
  return own !== undefined && r.chance(0.6) ? own : r.pick(['', 'wrong', 'x'.repeat(300), own ?? 'y']);
}

function returnTo(r: Rng): string {
  const wide = ['/\u0100', '/\u2603', '/\u007f', '/a\u{1f600}'];
  return r.pick(['/account/applications', '/', '//evil.example', 'https://evil.example', '/\\evil', '/\t/x', '/a\r\nb', '/%0d%0a', '/\xe9', '/x?y=1&z', '/' + 'a'.repeat(5000), '', 'javascript:x', '/oauth2/authorize?client_id=x', ...wide]);
}

export function authRequest(r: Rng, w: AuthWorld): FuzzRequest {
  const h: [string, string][] = [];
  let session = r.chance(0.8) ? w.session : r.pick(['', 'garbage', w.session + 'x', 'A'.repeat(43)]);
  const csrf = r.chance(0.8) ? w.csrf : r.pick(['', 'x', 'A'.repeat(43)]);
  const cookieFor = (s: string) =>
    r.chance(0.7)
      ? `__Host-sleeve-session=${s}; __Host-sleeve-csrf=${w.csrf}`
      : r.pick([`__Host-sleeve-csrf=${w.csrf}`, `__Host-sleeve-session=${s}`, `__Host-sleeve-session=${s}; __Host-sleeve-session=garbage; __Host-sleeve-csrf=${w.csrf}`]);
  const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
  const someClient = r.pick(w.clients);
  const authorizations = [`Bearer ${w.accessToken}`, `bearer ${w.accessToken}`, 'Bearer nope', basic(someClient.id, someClient.secret), basic(someClient.id, 'wrong'), basic('', ''), basic('\u0000', '\u0000'), `Bearer ${w.accessToken}x`];
  let path: string;
  let method: string | undefined;
  let fields: () => [string, string][] = () => [];
  let endsSession = false;
  const kind = r.int(22);
  if (kind < 5) {
    path = '/oauth2/authorize';
    const id = clientId(r, w);
    const params: [string, string][] = [];
    const add = (k: string, v: string) => {
      if (r.chance(0.9)) params.push([k, v]);
      if (r.chance(0.03)) params.push([k, v]);
    };
    add('client_id', id);
    add('response_type', r.chance(0.8) ? 'code' : r.pick(['token', 'id_token', '', 'code token', 'CODE']));
    add('scope', r.pick(SCOPES));
    add('redirect_uri', redirectUri(r, w));
    if (r.chance(0.4)) add('state', oddText(r, r.between(0, 30)));
    if (r.chance(0.2)) add('access_type', r.pick(['offline', 'online', 'x']));
    if (r.chance(0.2)) add('approval_prompt', r.pick(['force', 'auto', 'x']));
    if (r.chance(0.2)) add('response_mode', r.pick(['query', 'form_post', 'fragment', 'x']));
    if (r.chance(0.2)) add('code_challenge_method', r.pick(['S256', 'plain', 's256', 'x']));
    if (r.chance(0.2)) add('code_challenge', r.pick(['A'.repeat(43), 'a'.repeat(128), 'short', 'a'.repeat(200), '+'.repeat(43)]));
    if (r.chance(0.1)) add(oddText(r, 4), oddText(r, 8));
    const qs = params.map(([k, v]) => `${encodeURIComponent(k)}=${r.chance(0.95) ? encodeURIComponent(v) : v.replace(/[ #]/g, '+')}`).join('&');
    path += `?${qs}`;
    method = r.chance(0.6) ? 'GET' : r.chance(0.9) ? 'POST' : undefined;
    fields = () => [
      ['csrf_token', csrf],
      ['decision', r.pick(['allow', 'deny', 'x', ''])],
    ];
  } else if (kind < 8) {
    path = '/oauth2/token';
    method = r.chance(0.85) ? 'POST' : undefined;
    const id = clientId(r, w);
    fields = () => {
      const f: [string, string][] = [['grant_type', r.pick(['authorization_code', 'refresh_token', 'refresh_token', 'password', 'client_credentials', '', 'x', 'urn:ietf:params:oauth:grant-type:device_code'])]];
      if (r.chance(0.7)) f.push(['client_id', id], ['client_secret', clientSecret(r, w, id)]);
      if (r.chance(0.5)) f.push(['refresh_token', r.chance(0.5) ? w.refreshToken : oddText(r, r.between(0, 50))]);
      if (r.chance(0.4)) f.push(['code', r.pick(['', 'x', 'A'.repeat(43), oddText(r, 20)])]);
      if (r.chance(0.4)) f.push(['redirect_uri', redirectUri(r, w)]);
      if (r.chance(0.2)) f.push(['code_verifier', r.pick(['a'.repeat(43), 'x', ''])]);
      if (r.chance(0.2)) f.push(['device_code', r.pick(['', 'x', 'A'.repeat(43), oddText(r, 20)])]);
      if (r.chance(0.1)) f.push(['token_type', r.pick(['bearer', 'mac', ''])]);
      if (r.chance(0.05)) f.push(['grant_type', 'refresh_token']);
      return f;
    };
  } else if (kind < 10) {
    path = r.pick(['/oauth2/revoke', '/oauth2/introspect', '/oauth2/device_authorization']);
    method = r.chance(0.85) ? 'POST' : undefined;
    const id = clientId(r, w);
    fields = () => {
      // The real access token is revoked only on purpose by no one: introspect may see it, revoke only garbage.
      const token = path === '/oauth2/introspect' && r.chance(0.5) ? r.pick([w.accessToken, w.refreshToken]) : oddText(r, r.between(0, 60));
      const f: [string, string][] = [['token', token]];
      if (r.chance(0.7)) f.push(['client_id', id], ['client_secret', clientSecret(r, w, id)]);
      if (r.chance(0.3)) f.push(['token_type_hint', r.pick(['access_token', 'refresh_token', 'x'])]);
      if (r.chance(0.3)) f.push(['scope', r.pick(SCOPES)]);
      if (r.chance(0.05)) f.push(['token', 'again']);
      return f;
    };
  } else if (kind < 12) {
    path = '/oauth2/userinfo';
    if (r.chance(0.2)) path += `?access_token=${r.chance(0.5) ? w.accessToken : 'x'}`;
    fields = () => (r.chance(0.5) ? [['access_token', r.chance(0.5) ? w.accessToken : 'x']] : []);
    if (r.chance(0.6)) h.push(['Authorization', r.pick(authorizations)]);
  } else if (kind < 15) {
    path = `/login${r.chance(0.5) ? `?return_to=${encodeURIComponent(returnTo(r))}` : ''}`;
    method = r.chance(0.6) ? 'POST' : undefined;
    endsSession = true;
    fields = () => [
      ['csrf_token', csrf],
      ['username', r.chance(0.5) ? w.user : r.pick(['', 'nobody', w.user.toUpperCase(), 'x'.repeat(500), '\u00e9\u0301', `${w.user}\u0000`, oddText(r, 10)])],
      // A right password is rare: each runs scrypt.
      ['password', r.chance(0.02) ? w.password : r.pick(['', 'wrong', 'x'.repeat(3000), oddText(r, 10)])],
      ['return_to', returnTo(r)],
    ];
  } else if (kind < 18) {
    const id = r.chance(0.5) ? String(r.pick(w.appIds)) : r.pick(['999999', '0', '-1', 'x', '1e3', '9'.repeat(30), '%00', '']);
    const action = r.pick(['', '/register', `/edit/${id}`, `/remove/${id}`, `/reset-secret/${id}`, `/revoke/${id}`]);
    path = `/account/applications${action}`;
    method = r.chance(0.5) ? 'POST' : undefined;
    // The fuzz's own applications and grant stay: removing them would leave the rest of the run nothing valid to send.
    if (/remove|reset-secret|revoke/.test(action) && w.appIds.map(String).includes(id)) method = 'GET';
    fields = () => [
      ['csrf_token', csrf],
      ['name', r.pick(['Fuzz app', '', ' ', 'x'.repeat(200), '<script>', '\u0000', oddText(r, 10)])],
      ['kind', r.pick(['confidential', 'public', '', 'x'])],
      ['redirect_uri', redirectUri(r, w)],
    ];
  } else if (kind < 19) {
    path = r.pick(['/logout', '/oauth2/oob', `/oauth2/oob?code=${oddText(r, 10)}&state=${oddText(r, 5)}`, '/oauth2/device', `/oauth2/device?user_code=${oddText(r, 9)}`, `/oauth2/device?done=${oddText(r, 4)}`, '/static/sleeve.css', `/user/${r.pick([w.user, 'nobody', '%00', '\xe9', 'a'.repeat(3000)])}`]);
    // A valid session would be ended for the rest of the run: logout gets a stale one.
    if (path === '/logout') session = `${w.spareSession}x`;
    fields = () => [
      ['csrf_token', csrf],
      ['decision', r.pick(['allow', 'deny', 'x'])],
    ];
  } else if (kind < 20) {
    path = r.pick(['/', '/.well-known/oauth-authorization-server', '/.well-known/openid-configuration', '/healthz', '/readyz', '/oauth2/', '/oauth2/nope', '/account', '/static/', '/favicon.ico']);
  } else if (kind < 21) {
    path = longPath(r, r.pick(['/oauth2', '/account/applications', '']));
  } else {
    path = `/${oddText(r, r.between(1, 60))}`;
  }
  if (r.chance(0.1)) path = mangle(r, path);
  path = rawBytes(r, path.replace(/ /g, '%20'));
  // Most of the website and authorize need a signed-in browser: most requests carry its cookies.
  if (r.chance(0.8)) h.push(['Cookie', r.chance(0.8) ? cookieFor(endsSession ? w.spareSession : session) : r.pick([`__Host-sleeve-csrf=${w.csrf}`, 'garbage'])]);
  commonHeaders(r, h, { etags: [], authorizations });
  const hasBody = method === 'POST' ? r.chance(0.95) : r.chance(0.1);
  const b = hasBody ? body(r, h, fields) : Buffer.alloc(0);
  return finish(r, { method, target: path + (path.includes('?') ? '' : query(r)), headers: h, body: b }, hasBody);
}
