/*
 * An S3 front that checks AWS Signature Version 4 the way S3 does, for the one key pair it
 * knows, and passes what it accepts on to a real S3-compatible server (s3rver, which checks
 * no signatures). Written from the published algorithm (AWS "Signature Version 4 signing
 * process"): the canonical request, the string to sign, the HMAC-SHA256 key chain. A bad
 * signature, an unknown key or a body whose SHA-256 is not the one signed gets S3's 403
 * answer. Requests without credentials (a browser following a redirect to a public bucket)
 * pass unchecked, as S3 lets anonymous reads of a public bucket through. s3rver gets what
 * passed without its Authorization header (s3rver refuses key ids other than its own).
 */
import { createHash, createHmac } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';

export interface SigV4Proxy {
  endpoint: string;
  /** Requests let through with a valid signature. */
  signed: number;
  /** Requests refused, with why. */
  refused: string[];
  /** Requests let through without credentials. */
  anonymous: number;
  close(): Promise<void>;
}

const hmac = (key: Buffer | string, data: string): Buffer => createHmac('sha256', key).update(data, 'utf8').digest();
const sha256hex = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');

/** RFC 3986 encoding, as SigV4 wants it for query names and values. */
function uriEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function canonicalQuery(query: string): string {
  if (query === '') return '';
  const pairs = query.split('&').map((part) => {
    const eq = part.indexOf('=');
    const k = decodeURIComponent(eq === -1 ? part : part.slice(0, eq));
    const v = eq === -1 ? '' : decodeURIComponent(part.slice(eq + 1));
    return [uriEncode(k), uriEncode(v)] as const;
  });
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join('&');
}

/** Why the request's signature is not valid for the key pair, or undefined when it is. */
function checkSignature(req: IncomingMessage, body: Buffer, key: { accessKeyId: string; secretAccessKey: string }): string | undefined {
  const auth = req.headers.authorization ?? '';
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (m === null) return `malformed Authorization: ${auth}`;
  const [, accessKeyId, date, region, signedHeaders, signature] = m as unknown as [string, string, string, string, string, string];
  if (accessKeyId !== key.accessKeyId) return `unknown access key ${accessKeyId}`;
  const amzDate = String(req.headers['x-amz-date'] ?? '');
  if (!amzDate.startsWith(date)) return `x-amz-date ${amzDate} is not of the credential's day ${date}`;
  const payloadHash = String(req.headers['x-amz-content-sha256'] ?? '');
  if (/^[0-9a-f]{64}$/.test(payloadHash) && sha256hex(body) !== payloadHash) return 'the body is not the one signed';
  const names = signedHeaders.split(';');
  if (!names.includes('host') || !names.includes('x-amz-date')) return `SignedHeaders lacks host or x-amz-date: ${signedHeaders}`;
  const headerLines = names.map((name) => {
    const value = req.headers[name];
    const text = Array.isArray(value) ? value.join(',') : (value ?? '');
    return `${name}:${text.trim().replace(/\s+/g, ' ')}\n`;
  });
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const canonical = [req.method, q === -1 ? url : url.slice(0, q), canonicalQuery(q === -1 ? '' : url.slice(q + 1)), headerLines.join(''), signedHeaders, payloadHash].join('\n');
  const scope = `${date}/${region}/s3/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256hex(canonical)].join('\n');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${key.secretAccessKey}`, date), region), 's3'), 'aws4_request');
  const expected = createHmac('sha256', signingKey).update(toSign, 'utf8').digest('hex');
  return expected === signature ? undefined : 'signature does not match';
}

function refuse(res: ServerResponse, code: string, message: string): void {
  const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message></Error>`;
  res.writeHead(403, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(xml) });
  res.end(xml);
}

/** Starts the front on 127.0.0.1 (a free port), passing accepted requests to `target` (http://host:port). */
export async function startSigV4Proxy(target: string, key: { accessKeyId: string; secretAccessKey: string }): Promise<SigV4Proxy> {
  const upstream = new URL(target);
  const state = { signed: 0, refused: [] as string[], anonymous: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.headers.authorization === undefined) {
        // S3 lets anonymous reads of a public bucket through, nothing else.
        if (req.method !== 'GET' && req.method !== 'HEAD') {
          state.refused.push(`${req.method} ${req.url}: anonymous`);
          refuse(res, 'AccessDenied', 'Access Denied');
          return;
        }
        state.anonymous++;
      } else {
        let why: string | undefined;
        try {
          why = checkSignature(req, body, key);
        } catch (err) {
          why = `unreadable request: ${(err as Error).message}`;
        }
        if (why !== undefined) {
          state.refused.push(`${req.method} ${req.url}: ${why}`);
          refuse(res, why.startsWith('unknown access key') ? 'InvalidAccessKeyId' : 'SignatureDoesNotMatch', why);
          return;
        }
        state.signed++;
      }
      // Checked here: s3rver gets the request without the signature (it knows only its own key).
      const { authorization: _checked, ...headers } = req.headers;
      const forward = http.request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...headers, host: upstream.host } },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      forward.on('error', () => res.destroy());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    get signed() {
      return state.signed;
    },
    get refused() {
      return state.refused;
    },
    get anonymous() {
      return state.anonymous;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
