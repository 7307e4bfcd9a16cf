import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { connect } from 'node:net';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { generate } from 'selfsigned';
import { loadConfig } from '../../src/config/load.js';
import { serve, type Server } from '../../src/serve.js';
import { DIALECT, freePort, makeTestEnv, type TestEnv } from '../helpers/env.js';

const CERT = 'self-signed-cert.pem';
const KEY = 'self-signed-key.pem';
/** A path the auth listener answers 404 JSON, before and after the authorization service. */
const MISSING = '/oauth2/no-such-endpoint';

interface TlsAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  peer: ReturnType<TLSSocket['getPeerCertificate']>;
}

/** One HTTPS request on its own connection; `tls` adds options such as ca/servername or rejectUnauthorized. */
function httpsGet(port: number, urlPath: string, tls: https.RequestOptions = { rejectUnauthorized: false }, method = 'GET'): Promise<TlsAnswer> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path: urlPath, method, agent: false, ...tls }, (res) => {
      const peer = (res.socket as TLSSocket).getPeerCertificate();
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), peer }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.end();
  });
}

/** Sends bytes over plain TCP and gathers what comes back until the server closes (or a timeout). */
function plainExchange(port: number, request: string, timeoutMs = 5_000): Promise<{ data: Buffer; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ data: Buffer.concat(chunks), closed: false });
    }, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ data: Buffer.concat(chunks), closed: true });
    });
    socket.write(request);
  });
}

async function start(t: TestEnv, extra: Record<string, string> = {}): Promise<{ server: Server; authPort: number }> {
  const authPort = await freePort();
  const coverArtPort = await freePort();
  Object.assign(t.env, {
    SLEEVE_AUTH_LISTEN: `127.0.0.1:${authPort}`,
    SLEEVE_COVERART_LISTEN: `127.0.0.1:${coverArtPort}`,
    SLEEVE_BASE_URL: `http://127.0.0.1:${coverArtPort}`,
    ...extra,
  });
  const server = await serve(loadConfig(t.env), { logStream: new PassThrough().resume() });
  return { server, authPort };
}

describe(`the auth listener (${DIALECT})`, () => {
  describe('with the generated self-signed certificate', () => {
    let t: TestEnv;
    let server: Server | undefined;
    let authPort: number;
    let certPem: string;
    let fingerprint: string;

    before(async () => {
      t = await makeTestEnv();
      ({ server, authPort } = await start(t));
      certPem = await readFile(path.join(t.dir, 'tls', CERT), 'utf8');
      fingerprint = new X509Certificate(certPem).fingerprint256;
    });

    after(async () => {
      await server?.close();
      await t?.cleanup();
    });

    it('starts both listeners, the auth one over HTTPS on the port asked for', async () => {
      assert.ok(server);
      assert.equal(server.authAddress, `https://127.0.0.1:${authPort}`);
      assert.match(server.coverArtAddress ?? '', /^http:\/\/127\.0\.0\.1:\d+$/);
      const coverArt = await fetch(`${server.coverArtAddress}/release/ddddeeee-ffff-4000-8111-222233334444/`);
      assert.equal(coverArt.status, 404, 'the cover art listener answers beside it');
      await coverArt.arrayBuffer();
    });

    it('writes a self-signed certificate and its key under $SLEEVE_DATA_DIR/tls/', async () => {
      const cert = new X509Certificate(certPem);
      assert.equal(cert.subject, cert.issuer, 'self-issued');
      assert.ok(cert.verify(cert.publicKey), 'signed by its own key');
      const key = createPrivateKey(await readFile(path.join(t.dir, 'tls', KEY), 'utf8'));
      assert.ok(cert.checkPrivateKey(key), 'the key on disk belongs to the certificate');
      assert.ok(Date.parse(cert.validFrom) <= Date.now() + 60_000 && Date.parse(cert.validTo) > Date.now() + 30 * 86_400_000, 'valid now and for a while');
      for (const name of ['DNS:localhost', 'IP Address:127.0.0.1']) assert.ok(cert.subjectAltName?.split(', ').includes(name), `${name} in ${cert.subjectAltName}`);
      const keyMode = (await stat(path.join(t.dir, 'tls', KEY))).mode & 0o777;
      assert.equal(keyMode & 0o077, 0, `the private key is readable by its owner only (mode ${keyMode.toString(8)})`);
    });

    it('serves that certificate and answers unknown endpoints 404 with JSON', async () => {
      for (const p of [MISSING, '/oauth2/no-such-endpoint?client_id=x', '/.well-known/no-such-document']) {
        const res = await httpsGet(authPort, p);
        assert.equal(res.status, 404, p);
        assert.match(String(res.headers['content-type']), /^application\/json/, p);
        const body = JSON.parse(res.body);
        assert.equal(typeof body.error, 'string', p);
        assert.equal(res.peer.fingerprint256, fingerprint, 'the certificate on disk is the one served');
        assert.ok(res.peer.subjectaltname?.split(', ').includes('DNS:localhost'), res.peer.subjectaltname);
        assert.ok(res.peer.subjectaltname?.split(', ').includes('IP Address:127.0.0.1'), res.peer.subjectaltname);
      }
    });

    it('answers other methods 404 too, with HTTPS-only headers', async () => {
      const res = await httpsGet(authPort, MISSING, { rejectUnauthorized: false }, 'POST');
      assert.equal(res.status, 404);
      assert.match(String(res.headers['strict-transport-security']), /max-age=\d+/);
      assert.equal(res.headers['cache-control'], 'no-store');
    });

    it('verifies for a client that trusts the certificate, by IP address and by localhost', async () => {
      const byIp = await httpsGet(authPort, MISSING, { ca: certPem });
      assert.equal(byIp.status, 404);
      const byName = await httpsGet(authPort, MISSING, { ca: certPem, servername: 'localhost' });
      assert.equal(byName.status, 404);
      await assert.rejects(httpsGet(authPort, MISSING, { ca: certPem, servername: 'elsewhere.example' }), /altnames|Hostname\/IP does not match/i);
    });

    it('is refused by a client that trusts nothing it was not told to', async () => {
      await assert.rejects(httpsGet(authPort, MISSING, {}), /self[- ]signed|unable to verify|certificate/i);
    });

    it('refuses plain HTTP on the auth port: no answer, or 400 invalid_request (docs/oauth.md)', async () => {
      const { data } = await plainExchange(authPort, `GET ${MISSING} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer abc\r\nConnection: close\r\n\r\n`);
      const text = data.toString('latin1');
      if (text !== '') {
        assert.match(text, /^HTTP\/1\.[01] 400 /, 'refused');
        assert.match(text, /invalid_request/);
        assert.match(text, /Invalid protocol, only HTTPS is allowed/);
      }
      assert.ok(!text.includes('No such endpoint') && !text.includes('not_found'), 'not the answer HTTPS gets');
      // The listener still serves HTTPS afterwards.
      assert.equal((await httpsGet(authPort, MISSING)).status, 404);
    });

    it('reuses the same certificate on the next start', async () => {
      const keyBefore = await readFile(path.join(t.dir, 'tls', KEY), 'utf8');
      await server?.close();
      server = undefined;
      ({ server, authPort } = await start(t));
      const res = await httpsGet(authPort, MISSING);
      assert.equal(res.status, 404);
      assert.equal(res.peer.fingerprint256, fingerprint);
      assert.equal(await readFile(path.join(t.dir, 'tls', CERT), 'utf8'), certPem);
      assert.equal(await readFile(path.join(t.dir, 'tls', KEY), 'utf8'), keyBefore);
    });

    it('makes a fresh pair when a crash left the key without its certificate', async () => {
      await server?.close();
      server = undefined;
      await rm(path.join(t.dir, 'tls', CERT));
      ({ server, authPort } = await start(t));
      const res = await httpsGet(authPort, MISSING);
      assert.equal(res.status, 404);
      assert.notEqual(res.peer.fingerprint256, fingerprint);
      const fresh = new X509Certificate(await readFile(path.join(t.dir, 'tls', CERT), 'utf8'));
      assert.equal(res.peer.fingerprint256, fresh.fingerprint256);
      assert.ok(fresh.checkPrivateKey(createPrivateKey(await readFile(path.join(t.dir, 'tls', KEY), 'utf8'))), 'the pair on disk matches');
    });
  });

  it('gives processes started at once on one fresh data directory one consistent pair', async () => {
    const t = await makeTestEnv();
    const servers: Server[] = [];
    try {
      const config = loadConfig({ ...t.env, SLEEVE_COVERART_LISTEN: '127.0.0.1:0', SLEEVE_AUTH_LISTEN: '127.0.0.1:0' });
      const started = await Promise.allSettled([1, 2, 3].map(() => serve(config, { only: 'auth' })));
      for (const r of started) if (r.status === 'fulfilled') servers.push(r.value);
      for (const r of started) if (r.status === 'rejected') throw r.reason;
      const onDisk = new X509Certificate(await readFile(path.join(t.dir, 'tls', CERT), 'utf8'));
      assert.ok(onDisk.checkPrivateKey(createPrivateKey(await readFile(path.join(t.dir, 'tls', KEY), 'utf8'))), 'the pair on disk matches');
      for (const s of servers) {
        // A completed handshake proves the served certificate and the key the server signs with belong together.
        const res = await httpsGet(Number(new URL(s.authAddress as string).port), MISSING, { ca: onDisk.toString(), servername: 'localhost' }).catch(
          (err: Error) => err,
        );
        if (res instanceof Error) {
          // Only acceptable when this process settled on an earlier pair than the one left on disk: it must still be a sound pair.
          const anyRes = await httpsGet(Number(new URL(s.authAddress as string).port), MISSING, { rejectUnauthorized: false });
          assert.equal(anyRes.status, 404, res.message);
        } else assert.equal(res.status, 404);
      }
    } finally {
      await Promise.all(servers.map((s) => s.close()));
      await t.cleanup();
    }
  });

  it('names the public auth host in the generated certificate', async () => {
    const t = await makeTestEnv();
    let server: Server | undefined;
    try {
      let authPort: number;
      ({ server, authPort } = await start(t, { SLEEVE_AUTH_URL: 'https://auth.sleeve.test:8443' }));
      const res = await httpsGet(authPort, MISSING, { ca: await readFile(path.join(t.dir, 'tls', CERT), 'utf8'), servername: 'auth.sleeve.test' });
      assert.equal(res.status, 404);
      assert.ok(res.peer.subjectaltname?.split(', ').includes('DNS:auth.sleeve.test'), res.peer.subjectaltname);
    } finally {
      await server?.close();
      await t.cleanup();
    }
  });

  it('serves only the auth listener with only: auth', async () => {
    const t = await makeTestEnv();
    const authPort = await freePort();
    t.env.SLEEVE_AUTH_LISTEN = `127.0.0.1:${authPort}`;
    const server = await serve(loadConfig(t.env), { only: 'auth', logStream: new PassThrough().resume() });
    try {
      assert.equal(server.coverArtAddress, undefined);
      assert.equal(server.authAddress, `https://127.0.0.1:${authPort}`);
      assert.equal((await httpsGet(authPort, MISSING)).status, 404);
    } finally {
      await server.close();
      await t.cleanup();
    }
  });

  describe('with SLEEVE_TLS_CERT and SLEEVE_TLS_KEY', () => {
    let t: TestEnv;
    let server: Server | undefined;
    let authPort: number;
    let certPem: string;

    before(async () => {
      t = await makeTestEnv();
      const pems = await generate([{ name: 'commonName', value: 'operator.sleeve.test' }], {
        keyType: 'ec',
        curve: 'P-256',
        algorithm: 'sha256',
        extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: 'operator.sleeve.test' }, { type: 7, ip: '127.0.0.1' }] }],
      });
      certPem = pems.cert;
      const certFile = path.join(t.dir, 'operator-cert.pem');
      const keyFile = path.join(t.dir, 'operator-key.pem');
      await writeFile(certFile, pems.cert);
      await writeFile(keyFile, pems.private, { mode: 0o600 });
      ({ server, authPort } = await start(t, { SLEEVE_TLS_CERT: certFile, SLEEVE_TLS_KEY: keyFile }));
    });

    after(async () => {
      await server?.close();
      await t?.cleanup();
    });

    it('serves the operator certificate', async () => {
      const res = await httpsGet(authPort, MISSING);
      assert.equal(res.status, 404);
      assert.equal(res.peer.fingerprint256, new X509Certificate(certPem).fingerprint256);
      assert.match(res.peer.subject.CN as string, /operator\.sleeve\.test/);
      const verified = await httpsGet(authPort, MISSING, { ca: certPem, servername: 'operator.sleeve.test' });
      assert.equal(verified.status, 404);
    });

    it('generates no certificate of its own', () => {
      assert.equal(existsSync(path.join(t.dir, 'tls')), false);
    });
  });
});
