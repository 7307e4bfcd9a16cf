/*
 * `sleeve tls init` (docs/clients.md, "A certificate the clients trust"): a local certificate
 * authority and a server certificate it signs for the names a mirror answers as (its own name,
 * coverartarchive.org…), under {SLEEVE_DATA_DIR}/tls/. The CA is made once and kept; each run
 * makes a new server key and certificate. The X.509 work is the `selfsigned` library's
 * (@peculiar/x509 underneath); node:crypto checks the result.
 */
import { createPrivateKey, randomBytes, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { link, mkdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { AppError, invalidInput } from '../shared/errors.js';

export interface LocalCa {
  ca: string;
  cert: string;
  key: string;
  names: string[];
  /** Whether this run made the CA (else it was kept). */
  caCreated: boolean;
  /** The server certificate's last day (ISO 8601). */
  notAfter: string;
}

/** The files `tls init` writes, in {dataDir}/tls/. */
function localCaFiles(dataDir: string): { dir: string; ca: string; caKey: string; cert: string; key: string } {
  const dir = path.join(dataDir, 'tls');
  return { dir, ca: path.join(dir, 'ca.crt'), caKey: path.join(dir, 'ca.key'), cert: path.join(dir, 'server.crt'), key: path.join(dir, 'server.key') };
}

const DAY = 24 * 3600 * 1000;
const CA_DAYS = 3650;
/** The longest life clients of every kind accept for a server certificate (Apple's rule). */
const SERVER_DAYS = 825;
const MAX_NAMES = 100;
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Checks and normalises the names: DNS names (letters, digits and `-` in dot-separated labels
 * of 1–63, at most 253 in all; lower-cased) or IP addresses. Repeats are dropped.
 */
function checkNames(raw: readonly string[]): string[] {
  if (raw.length === 0) throw invalidInput('give at least one --name (e.g. --name musicbrainz.lan --name coverartarchive.org)');
  if (raw.length > MAX_NAMES) throw invalidInput(`at most ${MAX_NAMES} names`);
  const names = raw.map((n) => {
    if (isIP(n) !== 0) return n;
    const name = n.toLowerCase().replace(/\.$/, '');
    if (name.length === 0 || name.length > 253 || !name.split('.').every((l) => LABEL.test(l))) {
      throw invalidInput(`${JSON.stringify(n)} is not a host name (letters, digits and - in dot-separated labels) or an IP address`);
    }
    return name;
  });
  return [...new Set(names)];
}

/** A key file's mode must let only its owner read it. */
async function checkKeyMode(file: string): Promise<void> {
  const st = await stat(file);
  if (!st.isFile()) throw invalidInput(`${file} is not a file`);
  const mode = st.mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw invalidInput(`${file} has mode ${mode.toString(8).padStart(4, '0')}: a CA key must be readable by its owner only (chmod 600 ${file}), refusing to use it`);
  }
}

function exists(err: unknown): boolean {
  return (err as NodeJS.ErrnoException).code !== 'ENOENT';
}

async function readIfThere(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if (exists(err)) throw err;
    return undefined;
  }
}

/** The CA on disk, checked (key mode, the pair belonging together, a CA certificate), or undefined when there is none. */
async function existingCa(files: ReturnType<typeof localCaFiles>): Promise<{ cert: string; key: string } | undefined> {
  const [cert, key] = [await readIfThere(files.ca), await readIfThere(files.caKey)];
  if (cert === undefined && key === undefined) return undefined;
  if (key === undefined) throw invalidInput(`${files.ca} exists without ${files.caKey}: move it away to make a new CA`);
  await checkKeyMode(files.caKey);
  if (cert === undefined) throw invalidInput(`${files.caKey} exists without ${files.ca}: move it away to make a new CA`);
  try {
    const x509 = new X509Certificate(cert);
    if (!x509.ca) throw new Error('not a CA certificate');
    if (!x509.checkPrivateKey(createPrivateKey(key))) throw new Error(`${files.caKey} is not its key`);
  } catch (err) {
    throw invalidInput(`${files.ca} is not a usable CA (${(err as Error).message}); move ${files.ca} and ${files.caKey} away to make a new CA`);
  }
  return { cert, key };
}

async function makeCa(now: Date): Promise<{ cert: string; key: string }> {
  const { generate } = await import('selfsigned');
  const id = randomBytes(4).toString('hex');
  const pems = await generate([{ name: 'commonName', value: `sleeve local CA ${id}` }, { name: 'organizationName', value: 'sleeve' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(now.getTime() - 3600 * 1000),
    notAfterDate: new Date(now.getTime() + CA_DAYS * DAY),
    extensions: [
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

async function makeServer(ca: { cert: string; key: string }, names: string[], now: Date): Promise<{ cert: string; key: string }> {
  const { generate } = await import('selfsigned');
  const pems = await generate([{ name: 'commonName', value: names[0] as string }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(now.getTime() - 3600 * 1000),
    notAfterDate: new Date(now.getTime() + SERVER_DAYS * DAY),
    ca,
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: names.map((n) => (isIP(n) !== 0 ? { type: 7 as const, ip: n } : { type: 2 as const, value: n })) },
    ],
  });
  // Checked with node's own X.509 code: issued by the CA, signed by its key, naming every name.
  const leaf = new X509Certificate(pems.cert);
  const issuer = new X509Certificate(ca.cert);
  if (!leaf.checkIssued(issuer) || !leaf.verify(issuer.publicKey)) throw new Error('the server certificate does not verify against the CA');
  for (const n of names) if ((isIP(n) !== 0 ? leaf.checkIP(n) : leaf.checkHost(n, { wildcards: false })) === undefined) throw new Error(`the server certificate does not name ${n}`);
  return { cert: pems.cert, key: pems.private };
}

async function writeAtomic(file: string, text: string, mode: number): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  await writeFile(tmp, text, { mode });
  await rename(tmp, file);
}

/**
 * Writes a new CA's key only if there is none: made under a temporary name and linked into
 * place, so that a CA key clients may already trust is never replaced, even by a second run
 * at the same moment (whose link fails).
 */
async function writeNewCaKey(file: string, key: string): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  await writeFile(tmp, key, { mode: 0o600 });
  try {
    await link(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new AppError('CONFLICT', `${file} appeared while this run was making a CA (another sleeve tls init?); run again`);
    throw err;
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
}

/**
 * `sleeve tls init`: keeps the CA under {dataDir}/tls/ (making it the first time) and writes a
 * new server certificate and key for `rawNames`. Bad names, and a CA key whose mode lets others
 * read it, are refused before anything is written.
 */
export async function initLocalCa(dataDir: string, rawNames: readonly string[], now = new Date()): Promise<LocalCa> {
  const names = checkNames(rawNames);
  const files = localCaFiles(dataDir);
  await mkdir(files.dir, { recursive: true, mode: 0o700 });
  const kept = await existingCa(files);
  const ca = kept ?? (await makeCa(now));
  const server = await makeServer(ca, names, now);
  if (kept === undefined) {
    await writeNewCaKey(files.caKey, ca.key);
    await writeAtomic(files.ca, ca.cert, 0o644);
  }
  // Key first, then certificate: the listener checks that the two belong together.
  await writeAtomic(files.key, server.key, 0o600);
  await writeAtomic(files.cert, server.cert, 0o644);
  return { ca: files.ca, cert: files.cert, key: files.key, names, caCreated: kept === undefined, notAfter: new Date(new X509Certificate(server.cert).validTo).toISOString() };
}
