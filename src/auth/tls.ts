import { createPrivateKey, X509Certificate } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { readFile, writeFile, mkdir, rename } from 'node:fs/promises';
import path from 'node:path';

export interface TlsMaterial {
  cert: string;
  key: string;
  /** Whether sleeve generated the pair (self-signed) rather than the operator. */
  generated: boolean;
}

/**
 * The auth listener's certificate: the operator's PEM files when configured, else the pair
 * `sleeve tls init` wrote (server.crt, server.key) when there is one, else a self-signed pair
 * kept in the data directory (made on first start, reused after).
 */
export async function loadTlsMaterial(opts: { certFile?: string; keyFile?: string; dataDir: string; hostnames: string[] }): Promise<TlsMaterial> {
  if (opts.certFile !== undefined && opts.keyFile !== undefined) {
    return { cert: await readFile(opts.certFile, 'utf8'), key: await readFile(opts.keyFile, 'utf8'), generated: false };
  }
  const dir = path.join(opts.dataDir, 'tls');
  const fromInit = await localCaPair(path.join(dir, 'server.crt'), path.join(dir, 'server.key'));
  if (fromInit !== undefined) return { ...fromInit, generated: false };
  const certFile = path.join(dir, 'self-signed-cert.pem');
  const keyFile = path.join(dir, 'self-signed-key.pem');
  // Several processes may start at once on one data directory: what is served is always
  // a pair read back from disk and checked to belong together, so two processes writing
  // at the same moment can never leave one serving a key and someone else's certificate.
  for (let attempt = 0; attempt < 5; attempt++) {
    const found = await readPair(certFile, keyFile);
    if (found !== undefined) return { ...found, generated: true };
    if (attempt > 0) {
      // Another process may be writing a pair right now: give it a moment before writing over it.
      await sleep(50 + Math.random() * 200);
      const settled = await readPair(certFile, keyFile);
      if (settled !== undefined) return { ...settled, generated: true };
    }
    const pems = await generatePair(opts.hostnames);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    // Key first, then cert: a crash in between leaves a mismatched pair, which the next start replaces.
    await writeAtomic(keyFile, pems.private, 0o600);
    await writeAtomic(certFile, pems.cert, 0o644);
  }
  throw new Error(`could not settle on a self-signed certificate in ${dir}; set SLEEVE_TLS_CERT and SLEEVE_TLS_KEY`);
}

/** A certificate and its key as PEM text, or undefined when either file is missing. */
async function readPairFiles(certFile: string, keyFile: string): Promise<{ cert: string; key: string } | undefined> {
  try {
    return { cert: await readFile(certFile, 'utf8'), key: await readFile(keyFile, 'utf8') };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    return undefined;
  }
}

/**
 * The pair `sleeve tls init` wrote, when there is one. Unlike the self-signed pair it is never
 * replaced here (clients trust its CA): one that does not belong together or has expired stops
 * the start with a line saying how to renew it.
 */
async function localCaPair(certFile: string, keyFile: string): Promise<{ cert: string; key: string } | undefined> {
  const files = await readPairFiles(certFile, keyFile);
  if (files === undefined) return undefined;
  const { cert, key } = files;
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
    if (!x509.checkPrivateKey(createPrivateKey(key))) throw new Error(`${keyFile} is not the key of ${certFile}`);
  } catch (err) {
    throw new Error(`${(err as Error).message}; run sleeve tls init --name NAME... again`);
  }
  if (Date.parse(x509.validTo) <= Date.now()) throw new Error(`${certFile} expired on ${new Date(x509.validTo).toISOString()}; run sleeve tls init --name NAME... again`);
  return { cert, key };
}

/** The pair on disk when there is one whose halves belong together and that is not near its end. */
async function readPair(certFile: string, keyFile: string): Promise<{ cert: string; key: string } | undefined> {
  const files = await readPairFiles(certFile, keyFile);
  if (files === undefined) return undefined;
  const { cert, key } = files;
  try {
    const x509 = new X509Certificate(cert);
    // A generated certificate close to its end is replaced rather than served expired.
    if (Date.parse(x509.validTo) - Date.now() <= 30 * 24 * 3600 * 1000) return undefined;
    if (!x509.checkPrivateKey(createPrivateKey(key))) return undefined;
  } catch {
    return undefined;
  }
  return { cert, key };
}

async function generatePair(hostnames: string[]): Promise<{ cert: string; private: string }> {
  const names = [...new Set(['localhost', ...hostnames])];
  // Loaded only to make a pair (an X.509 library and its ASN.1 packages): a server that finds its pair, or has no TLS listener, never needs it.
  const { generate } = await import('selfsigned');
  return generate([{ name: 'commonName', value: 'sleeve (self-signed)' }], {
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
}

async function writeAtomic(file: string, text: string, mode: number): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  await writeFile(tmp, text, { mode });
  await rename(tmp, file);
}
