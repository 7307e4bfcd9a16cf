/*
 * `sleeve tls init --name NAME...`: a local CA and a server certificate it signs, under
 * {SLEEVE_DATA_DIR}/tls/ (auth/local-ca.ts; docs/clients.md). Prints where they are and how to
 * make each kind of client trust the CA; with --json only `{"ca", "cert", "key", "names"}`.
 */
import { invalidInput } from '../shared/errors.js';
import type { Command } from './command.js';

const USAGE = 'tls init --name NAME... [--json]';

/** How to trust the CA on a client machine, for each kind of client (printed by tls init). */
function trustInstructions(ca: string): string {
  return [
    'Trust the CA on each client machine (copy ca.crt there first; never ca.key):',
    '  Debian/Ubuntu, system-wide (curl, Qt and so MusicBrainz Picard, Python\'s ssl and so musicbrainzngs):',
    `    sudo cp ${ca} /usr/local/share/ca-certificates/sleeve-local-ca.crt && sudo update-ca-certificates`,
    '  MusicBrainz Picard (Qt): reads the system store above; restart Picard after update-ca-certificates.',
    '  Python (requests: beets; urllib: musicbrainzngs), without touching the system store:',
    `    export REQUESTS_CA_BUNDLE=${ca} SSL_CERT_FILE=${ca}`,
    '    (with a pip-installed requests, REQUESTS_CA_BUNDLE is needed even after update-ca-certificates:',
    '     point it at /etc/ssl/certs/ca-certificates.crt)',
    '  Node.js (musicbrainz-api):',
    `    export NODE_EXTRA_CA_CERTS=${ca}`,
  ].join('\n');
}

const tlsInit: Command = {
  name: 'tls init',
  options: { name: { type: 'string', multiple: true } },
  async run(ctx) {
    if (ctx.args.length !== 0) throw invalidInput(`usage: sleeve ${USAGE}`);
    const names = Array.isArray(ctx.options.name) ? ctx.options.name : [];
    const { initLocalCa } = await import('../auth/local-ca.js');
    const made = await initLocalCa(ctx.config().dataDir, names);
    const human = [
      made.caCreated ? `made a new CA:        ${made.ca}` : `kept the CA:          ${made.ca}`,
      `server certificate:   ${made.cert}  (${made.names.join(', ')}; valid until ${made.notAfter.slice(0, 10)})`,
      `server key:           ${made.key}`,
      '',
      'The auth listener uses server.crt and server.key when SLEEVE_TLS_CERT is unset (restart it);',
      'nginx (deploy/nginx/musicbrainz-mirror.conf) points ssl_certificate and ssl_certificate_key at them.',
      '',
      trustInstructions(made.ca),
    ].join('\n');
    ctx.out(human, { ca: made.ca, cert: made.cert, key: made.key, names: made.names });
    return 0;
  },
};

export const TLS_COMMANDS: Record<string, Command> = { [tlsInit.name]: tlsInit };
