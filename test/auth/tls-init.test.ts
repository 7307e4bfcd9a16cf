/*
 * `sleeve tls init --name NAME...` (docs/clients.md, "A certificate the clients trust"): a local
 * CA and a server certificate it signs under {SLEEVE_DATA_DIR}/tls/, with the keys 0600; a second
 * run keeps the CA and renews the certificate; bad names and a CA key others can read are refused,
 * changing nothing; the auth listener serves the certificate when SLEEVE_TLS_CERT is unset.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { chmod, readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { startAuthServer, type AuthServer } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, runCli, type TestEnv } from '../helpers/env.js';

const run = promisify(execFile);

describe(`sleeve tls init (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer | undefined;
  const tlsDir = () => path.join(t.dir, 'tls');
  const file = (name: string) => readFile(path.join(tlsDir(), name), 'utf8');

  before(async () => {
    t = await makeTestEnv();
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('refuses invalid names with one line, writing nothing', async () => {
    const bad = ['bad_name', 'a..b', '-x.lan', `${'x'.repeat(64)}.lan`, 'has space', 'ünï.lan', 'x.lan/'];
    const results = await Promise.all(bad.map((n) => runCli(t.env, ['tls', 'init', '--name', 'ok.lan', `--name=${n}`])));
    results.forEach((r, i) => {
      assert.equal(r.code, 2, `${bad[i]}: ${r.stderr}`);
      assert.equal(r.stderr, `sleeve: ${JSON.stringify(bad[i])} is not a host name (letters, digits and - in dot-separated labels) or an IP address\n`);
    });
    const none = await runCli(t.env, ['tls', 'init']);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /at least one --name/);
    assert.deepEqual(await readdir(tlsDir()).catch(() => []), [], 'nothing was written');
  });

  it('writes a CA and a server certificate for the names; keys 0600; --json names the files', async () => {
    const r = await runCli(t.env, ['--json', 'tls', 'init', '--name', 'MusicBrainz.lan', '--name', 'coverartarchive.org', '--name', 'eventartarchive.org', '--name', '127.0.0.1']);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(out, {
      ca: path.join(tlsDir(), 'ca.crt'),
      cert: path.join(tlsDir(), 'server.crt'),
      key: path.join(tlsDir(), 'server.key'),
      names: ['musicbrainz.lan', 'coverartarchive.org', 'eventartarchive.org', '127.0.0.1'],
    });
    for (const [name, mode] of [['ca.key', 0o600], ['server.key', 0o600], ['ca.crt', 0o644], ['server.crt', 0o644]] as const) {
      assert.equal((await stat(path.join(tlsDir(), name))).mode & 0o777, mode, name);
    }
    const ca = new X509Certificate(await file('ca.crt'));
    const leaf = new X509Certificate(await file('server.crt'));
    assert.ok(ca.ca, 'ca.crt is a CA certificate');
    assert.ok(!leaf.ca, 'server.crt is not');
    assert.ok(leaf.checkIssued(ca) && leaf.verify(ca.publicKey), 'the CA signed server.crt');
    for (const n of ['musicbrainz.lan', 'coverartarchive.org', 'eventartarchive.org']) assert.equal(leaf.checkHost(n), n);
    assert.equal(leaf.checkIP('127.0.0.1'), '127.0.0.1');
    assert.equal(leaf.checkHost('other.lan'), undefined);
    // OpenSSL, as the clients use it, agrees.
    const verified = await run('openssl', ['verify', '-purpose', 'sslserver', '-CAfile', out.ca, out.cert]);
    assert.match(verified.stdout, /: OK/);
  });

  it('prints how to trust the CA on Debian, for Qt/Picard, Python and Node', async () => {
    const r = await runCli(t.env, ['tls', 'init', '--name', 'musicbrainz.lan', '--name', 'coverartarchive.org']);
    assert.equal(r.code, 0, r.stderr);
    const ca = path.join(tlsDir(), 'ca.crt');
    assert.match(r.stdout, /^kept the CA: +\S+ca\.crt$/m);
    assert.ok(r.stdout.includes(`sudo cp ${ca} /usr/local/share/ca-certificates/sleeve-local-ca.crt && sudo update-ca-certificates`));
    assert.match(r.stdout, /Picard \(Qt\)/);
    assert.ok(r.stdout.includes(`export REQUESTS_CA_BUNDLE=${ca} SSL_CERT_FILE=${ca}`));
    assert.ok(r.stdout.includes(`export NODE_EXTRA_CA_CERTS=${ca}`));
    assert.ok(!r.stdout.includes('PRIVATE KEY'), 'no key is printed');
  });

  it('a second run keeps the CA and renews the server certificate', async () => {
    const [caBefore, caKeyBefore, certBefore, keyBefore] = await Promise.all(['ca.crt', 'ca.key', 'server.crt', 'server.key'].map(file));
    const r = await runCli(t.env, ['--json', 'tls', 'init', '--name', 'musicbrainz.lan']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await file('ca.crt'), caBefore);
    assert.equal(await file('ca.key'), caKeyBefore);
    assert.notEqual(await file('server.crt'), certBefore);
    assert.notEqual(await file('server.key'), keyBefore);
    const leaf = new X509Certificate(await file('server.crt'));
    assert.ok(leaf.checkIssued(new X509Certificate(caBefore)));
    assert.equal(leaf.checkHost('coverartarchive.org'), undefined, 'the names are those of this run');
  });

  it('refuses a CA key whose mode lets others read it, naming it, and changes nothing', async () => {
    const caKey = path.join(tlsDir(), 'ca.key');
    const certBefore = await file('server.crt');
    await chmod(caKey, 0o640);
    try {
      const r = await runCli(t.env, ['tls', 'init', '--name', 'musicbrainz.lan']);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stderr, `sleeve: ${caKey} has mode 0640: a CA key must be readable by its owner only (chmod 600 ${caKey}), refusing to use it\n`);
      assert.equal(await file('server.crt'), certBefore);
    } finally {
      await chmod(caKey, 0o600);
    }
  });

  it('the auth listener serves server.crt when SLEEVE_TLS_CERT is unset', async () => {
    s = await startAuthServer(t);
    const port = Number(new URL(s.base).port);
    const ca = await file('ca.crt');
    const peer = await new Promise<X509Certificate>((resolve, reject) => {
      const socket = tls.connect({ host: '127.0.0.1', port, servername: 'musicbrainz.lan', ca, checkServerIdentity: (_host, cert) => tls.checkServerIdentity('musicbrainz.lan', cert) }, () => {
        const cert = socket.getPeerX509Certificate();
        socket.end();
        if (cert === undefined) reject(new Error('no peer certificate'));
        else resolve(cert);
      });
      socket.on('error', reject);
    });
    assert.equal(peer.fingerprint256, new X509Certificate(await file('server.crt')).fingerprint256);
  });
});
