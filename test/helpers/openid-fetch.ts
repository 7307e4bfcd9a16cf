import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import type * as client from 'openid-client';

/** A Fetch API over node:https that trusts exactly this certificate (the listener's self-signed one). */
export function fetchTrusting(ca: string): client.CustomFetch {
  return (url, options) =>
    new Promise<Response>((resolve, reject) => {
      const body = options.body == null ? undefined : String(options.body);
      const req = https.request(url, { method: options.method, headers: options.headers, ca, signal: options.signal }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const headers = new Headers();
          for (const [name, value] of Object.entries(res.headers)) {
            for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(name, v);
          }
          const status = res.statusCode ?? 0;
          resolve(new Response(status === 204 || status === 304 ? null : Buffer.concat(chunks), { status, headers }));
        });
      });
      req.on('error', reject);
      req.end(body);
    });
}

/** fetchTrusting for the self-signed certificate a server made in its data directory. */
export function fetchTrustingDataDir(dataDir: string | undefined): client.CustomFetch {
  return fetchTrusting(readFileSync(path.join(dataDir as string, 'tls', 'self-signed-cert.pem'), 'utf8'));
}
