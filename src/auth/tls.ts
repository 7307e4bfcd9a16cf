import { X509Certificate } from 'node:crypto';
import { readFile, writeFile, mkdir, rename } from 'node:fs/promises';
import path from 'node:path';
import { generate } from 'selfsigned';

export interface TlsMaterial {
  cert: string;
  key: string;
  /** Whether sleeve generated the pair (self-signed) rather than the operator. */
  generated: boolean;
}

/**
 * The auth listener's certificate: the operator's PEM files when configured, else a
 * self-signed pair kept in the data directory (made on first start, reused after).
 */
export async function loadTlsMaterial(opts: { certFile?: string; keyFile?: string; dataDir: string; hostnames: string[] }): Promise<TlsMaterial> {
  if (opts.certFile !== undefined && opts.keyFile !== undefined) {
    return { cert: await readFile(opts.certFile, 'utf8'), key: await readFile(opts.keyFile, 'utf8'), generated: false };
  }
  const dir = path.join(opts.dataDir, 'tls');
  const certFile = path.join(dir, 'self-signed-cert.pem');
  const keyFile = path.join(dir, 'self-signed-key.pem');
  try {
    const cert = await readFile(certFile, 'utf8');
    const key = await readFile(keyFile, 'utf8');
    // A generated certificate close to its end is replaced rather than served expired.
    if (Date.parse(new X509Certificate(cert).validTo) - Date.now() > 30 * 24 * 3600 * 1000) return { cert, key, generated: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const names = [...new Set(['localhost', ...opts.hostnames])];
  const pems = await generate([{ name: 'commonName', value: 'sleeve (self-signed)' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 825 * 24 * 3600 * 1000),
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          ...names.filter((n) => !/^[\d.]+$|:/.test(n)).map((value) => ({ type: 2 as const, value })),
          { type: 7 as const, ip: '127.0.0.1' },
          { type: 7 as const, ip: '::1' },
        ],
      },
    ],
  });
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // Key first, then cert: a crash in between leaves no cert, so the next start makes a fresh pair.
  await writeAtomic(keyFile, pems.private, 0o600);
  await writeAtomic(certFile, pems.cert, 0o644);
  return { cert: pems.cert, key: pems.private, generated: true };
}

async function writeAtomic(file: string, text: string, mode: number): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}`;
  await writeFile(tmp, text, { mode });
  await rename(tmp, file);
}
