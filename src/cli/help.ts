/*
 * What `sleeve --help` and `sleeve COMMAND --help` print. Each command's help is its usage
 * line, what it does, and its options: every option the command's parser accepts is listed
 * (one without a description here still shows, so help never hides a flag), with the words
 * below.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from './command.js';

export const USAGE = `usage: sleeve [--config FILE] [--data-dir DIR] [--json] COMMAND ...
       sleeve COMMAND --help        that command's options
       sleeve --version             (or -v)

  serve [--only coverart|auth]          run the listeners (cover art http, auth https)
  migrate                               apply database migrations
  demo                                  load the demo catalogue
  release add MBID --release-group RG_MBID [--title T] [--date YYYY[-MM[-DD]]]
  release merge OLD_MBID INTO_MBID      the old MBID then resolves to the new one
  event add MBID [--name NAME]          an event of the Event Art Archive
  release list [--after MBID] [--limit N]
  release-group set-cover RG_MBID RELEASE_MBID
  art add MBID FILE [--type NAME]... [--comment TEXT] [--edit N] [--approved|--unapproved]
                                        MBID: a release's or an event's
  art edit RELEASE_MBID IMAGE_ID [--type NAME]... [--comment TEXT] [--approved|--unapproved] [--expect-revision N]
  art remove RELEASE_MBID IMAGE_ID [--expect-revision N]
  art reorder RELEASE_MBID IMAGE_ID... [--expect-revision N]
  art reindex [RELEASE_MBID]            rewrite index.json from the database
  art measure [RELEASE_MBID...]         fill the listings' width, height, size, mime_type and thumbnail_dimensions from the stored files
  art list RELEASE_MBID                 the images of a release, in order, its revision and pending edits
                                        art edit, remove, reorder, list, reindex and measure also take an event's MBID
  edit list [--release MBID|--event MBID] [--editor NAME|--operator] [--pending|--status S] [--before ID] [--limit N]
                                        the cover art edits, newest first
  edit show ID                          one edit: who, when, what, before and after
  edit approve ID [--note TEXT]         approve a pending edit and apply it
  edit reject ID [--note TEXT]          reject a pending edit (a pending addition is removed)
  user add NAME --email EMAIL --password-stdin [--email-verified] [--website URL]
           [--gender G] [--zoneinfo TZ] [--birth-date YYYY-MM-DD] [--country CC] [--role editor|approver]
  user edit NAME --role editor|approver  give a user the approver role, or take it away
  user list
  app add --owner NAME --name NAME --type confidential|public [--redirect-uri URI]... [--client-id ID] [--client-secret-stdin] [--resource-server] [--id-token-alg ES256|RS256] [--rotate-refresh-tokens] [--require-dpop]
  app edit CLIENT_ID [--name NAME] [--redirect-uri URI]... [--resource-server|--no-resource-server] [--id-token-alg ES256|RS256] [--rotate-refresh-tokens|--no-rotate-refresh-tokens] [--require-dpop|--no-require-dpop]
  app list [--owner NAME]
  keys list                             the id_token signing keys (never a private key)
  keys rotate                           new signing keys; the old stay published until their tokens expire
  tls init --name NAME...               a local CA and a server certificate for the names (docs/clients.md)
  import musicbrainz DIR [--skip-malformed] [--restart] [--batch-rows N]
                                        load a MusicBrainz dump (resumable; see docs/import.md)
  mirror images [RELEASE_MBID...] [--all] [--sizes 250,500,1200,original] [--concurrency N] [--rate R]
                                        fetch the imported images the store lacks from SLEEVE_UPSTREAM_URL

Configuration comes from SLEEVE_* environment variables (docs/configuration.md), --config FILE and --data-dir DIR.
Only serve, migrate and demo make a new database; the other commands need an existing one.
`;

interface CommandHelp {
  usage: string;
  about: string;
  /** Option name (without --) → its description, or [the name of its value, description]. */
  options?: Record<string, string | [string, string]>;
}

const GLOBAL_OPTIONS = `Options of every command:
  --json                 machine-readable output: one JSON value on stdout (errors too)
  --config FILE          settings as a JSON object of SLEEVE_* keys (the environment wins)
  --data-dir DIR         the data folder: database, files, TLS material (as SLEEVE_DATA_DIR, and wins over it)
  -h, --help             this help`;

const HELP: Record<string, CommandHelp> = {
  serve: {
    usage: 'serve [--only coverart|auth]',
    about: 'Runs the cover art listener (HTTP) and the authorization listener (HTTPS), applying pending migrations first.\nStops on SIGTERM or Ctrl-C after finishing the requests in flight.',
    options: { only: ['coverart|auth', 'run only one of the two services'] },
  },
  migrate: { usage: 'migrate', about: 'Applies pending database migrations and exits.' },
  demo: { usage: 'demo', about: 'Loads the demo catalogue (three releases in two release groups, with generated covers).' },
  'release add': {
    usage: 'release add MBID --release-group RG_MBID [--title T] [--date YYYY[-MM[-DD]]]',
    about: 'Adds a release, and its release group when the group is new.',
    options: {
      'release-group': ['RG_MBID', "the release group's MBID (required)"],
      title: ['T', 'the release title'],
      date: ['YYYY[-MM[-DD]]', 'the earliest release date (decides which release represents its group)'],
    },
  },
  'event add': {
    usage: 'event add MBID [--name NAME]',
    about: 'Adds an event of the Event Art Archive; art add then takes its MBID, and /event/MBID/ answers.',
    options: { name: ['NAME', 'the event name'] },
  },
  'release merge': {
    usage: 'release merge OLD_MBID INTO_MBID',
    about: 'Moves the images of OLD_MBID to INTO_MBID; the old MBID then resolves to the new one.',
  },
  'release list': {
    usage: 'release list [--after MBID] [--limit N]',
    about: 'Lists releases by MBID: MBID, release group, image count, date and title.\nWith more than N, the last line (or "next" with --json) names the MBID to pass to --after for the next page.',
    options: { after: ['MBID', 'start after this MBID'], limit: ['N', 'at most N releases (default 100, at most 10000)'] },
  },
  'release-group set-cover': {
    usage: 'release-group set-cover RG_MBID RELEASE_MBID',
    about: "Makes the release the group's cover art comes from (it must be in the group).",
  },
  'art add': {
    usage: 'art add MBID FILE [--type NAME]... [--comment TEXT] [--edit N] [--approved|--unapproved]',
    about:
      'Adds a JPEG, PNG or GIF image (FILE, or - for standard input) to a release: checks it, stores it\n' +
      'with its 250/500/1200 px thumbnails and rewrites the release\'s index.json. Recorded as an edit\n' +
      'of the operator, applied and approved at once; the listing\'s edit is its id unless --edit names another.\n' +
      'MBID may name an event (sleeve event add) instead: the image goes to the Event Art Archive, typed\n' +
      'with its types (Poster, …), recorded as an edit of the event all the same.',
    options: {
      type: ['NAME', 'an art type (Front, Back, Booklet, Medium, …; case-insensitive); repeat for several'],
      comment: ['TEXT', 'a comment shown in the listing'],
      edit: ['N', "the listing's edit: a MusicBrainz edit number, below 1000000000 (default: the sleeve edit's id)"],
      approved: 'mark the image approved (the default)',
      unapproved: 'mark the image not approved',
    },
  },
  'art edit': {
    usage: 'art edit RELEASE_MBID IMAGE_ID [--type NAME]... [--comment TEXT] [--approved|--unapproved] [--expect-revision N]',
    about: "Changes an image's types (replacing them when given), comment or approval.\nRELEASE_MBID may name an event instead (its types: Poster, …).",
    options: {
      type: ['NAME', 'an art type; repeat for several (replaces all of them)'],
      comment: ['TEXT', 'the new comment'],
      approved: 'mark the image approved',
      unapproved: 'mark the image not approved',
      'expect-revision': ['N', 'refuse (conflict) unless the release is still at this revision (sleeve art list)'],
    },
  },
  'art remove': {
    usage: 'art remove RELEASE_MBID IMAGE_ID [--expect-revision N]',
    about: "Removes an image and its files. RELEASE_MBID may name an event instead.",
    options: { 'expect-revision': ['N', 'refuse (conflict) unless the release is still at this revision (sleeve art list)'] },
  },
  'art reorder': {
    usage: 'art reorder RELEASE_MBID IMAGE_ID... [--expect-revision N]',
    about: 'Puts the images of a release (or of an event, its MBID given) in this order (name every image once).',
    options: { 'expect-revision': ['N', 'refuse (conflict) unless the release is still at this revision (sleeve art list)'] },
  },
  'art reindex': {
    usage: 'art reindex [RELEASE_MBID]',
    about: 'Rewrites index.json from the database (of one release, or of all), and removes files no image names any more.',
  },
  'art measure': {
    usage: 'art measure [RELEASE_MBID...]',
    about:
      "Measures the stored files of these releases' images (of every release with images when none is named): the original's\n" +
      'width, height (as displayed), size and type, and the thumbnails\' dimensions, which listings then carry; rewrites\n' +
      'index.json where they changed. One line per release; exit 1 when an image could not be measured.',
  },
  'art list': {
    usage: 'art list RELEASE_MBID',
    about:
      "Lists a release's images in order: id, types, approval, comment and the image URL (--json: the listing's entries),\n" +
      'then the release\'s revision (every change moves it; give it as --expect-revision) and the ids of its pending edits.\n' +
      "Given an event's MBID: the event's images, its revision and the ids of its pending edits.",
  },
  'edit list': {
    usage: 'edit list [--release MBID|--event MBID] [--editor NAME|--operator] [--pending|--status S] [--before ID] [--limit N]',
    about: 'Lists cover art edits, newest first: id, status, kind, release, image, editor and when.\nWith more than N, the last line (or "next" with --json) names the id to pass to --before for the next page.',
    options: {
      release: ['MBID', "only this release's edits (and those of releases merged into it)"],
      event: ['MBID', "only this event's edits (and those of events merged into it)"],
      editor: ['NAME', "only this user's edits"],
      operator: "only the operator's edits (made with the CLI)",
      pending: 'only edits waiting for an approver',
      status: ['S', 'only edits with this status: applied, pending, approved or rejected'],
      before: ['ID', 'only edits older than this one'],
      limit: ['N', 'at most N edits (default 50, at most 1000)'],
    },
  },
  'edit show': { usage: 'edit show ID', about: 'Shows one edit: its kind and status, who made it and when, the release and image, before and after, and who closed it.' },
  'edit approve': {
    usage: 'edit approve ID [--note TEXT]',
    about: 'Approves a pending edit as the operator and applies it (conflict when what it changes changed since it was made).',
    options: { note: ['TEXT', 'a note kept with the edit'] },
  },
  'edit reject': {
    usage: 'edit reject ID [--note TEXT]',
    about: 'Rejects a pending edit as the operator: nothing of it is applied, and a pending addition is removed with its files.',
    options: { note: ['TEXT', 'a note kept with the edit'] },
  },
  'user add': {
    usage: 'user add NAME --email EMAIL --password-stdin [--email-verified] [--website URL] [--gender G] [--zoneinfo TZ] [--birth-date YYYY-MM-DD] [--country CC] [--role editor|approver]',
    about: 'Adds a user of the authorization service. The password is read from standard input, never from the command line.',
    options: {
      email: ['EMAIL', 'the e-mail address'],
      'password-stdin': 'read the password from the first line of standard input (required)',
      'email-verified': 'mark the address verified',
      website: ['URL', "the user's website"],
      gender: ['G', 'male, female, other, not applicable or non-binary'],
      zoneinfo: ['TZ', 'a time zone such as Europe/Berlin (default UTC)'],
      'birth-date': ['YYYY-MM-DD', 'the date of birth'],
      country: ['CC', 'a two-letter country code'],
      role: ['editor|approver', "the user's cover art role (default editor): an approver's changes apply at once and an approver decides others'"],
    },
  },
  'user edit': {
    usage: 'user edit NAME --role editor|approver',
    about: "Changes a user's cover art role (an audit line records it).",
    options: { role: ['editor|approver', 'the new role'] },
  },
  'user list': { usage: 'user list', about: 'Lists the users: id, name, e-mail address, whether it is verified, and role (never a password hash).' },
  'app add': {
    usage: 'app add --owner NAME --name NAME --type confidential|public [--redirect-uri URI]... [--client-id ID] [--client-secret-stdin] [--resource-server] [--id-token-alg ES256|RS256] [--rotate-refresh-tokens] [--require-dpop]',
    about: 'Registers an OAuth application and prints its client_id and client_secret (the secret only now).',
    options: {
      owner: ['NAME', 'the user who owns the application (required)'],
      name: ['NAME', "the application's name"],
      type: ['confidential|public', 'a web application that keeps its secret, or an installed one (desktop, mobile)'],
      'redirect-uri': ['URI', 'where the user is sent back (repeat for several; loopback ones match on any port); required for confidential applications'],
      'client-id': ['ID', 'register under this client_id (a client with a built-in one, such as Picard: see docs/clients.md); letters, digits, - . _ ~'],
      'client-secret-stdin': 'read the client secret from the first line of standard input (its newline is not part of it) instead of generating one',
      'resource-server': 'let this client introspect the tokens of every application (an API that checks tokens)',
      'id-token-alg': 'sign its OpenID Connect id_tokens with ES256 or RS256 (default RS256)',
      'rotate-refresh-tokens': 'give a new refresh token on every refresh; a second use of an old one ends the grant (default: a refresh token lasts until revoked)',
      'require-dpop': 'refuse its token requests that carry no DPoP proof (RFC 9449): its tokens are always key-bound',
    },
  },
  'app edit': {
    usage: 'app edit CLIENT_ID [--name NAME] [--redirect-uri URI]... [--resource-server|--no-resource-server] [--id-token-alg ES256|RS256] [--rotate-refresh-tokens|--no-rotate-refresh-tokens] [--require-dpop|--no-require-dpop]',
    about: "Changes a registered application's name, redirect URIs, resource-server mark, id_token algorithm, refresh token rotation or whether it must use DPoP.",
    options: {
      name: ['NAME', "the application's new name"],
      'redirect-uri': ['URI', 'the new redirect URIs (repeat for several): they replace the registered list'],
      'resource-server': 'let this client introspect the tokens of every application',
      'no-resource-server': 'take that back: the client introspects only its own tokens',
      'id-token-alg': 'sign its OpenID Connect id_tokens with ES256 or RS256',
      'rotate-refresh-tokens': 'give a new refresh token on every refresh (a second use of an old one ends the grant)',
      'no-rotate-refresh-tokens': 'take that back: refresh tokens last until revoked',
      'require-dpop': 'refuse its token requests that carry no DPoP proof',
      'no-require-dpop': 'take that back: a DPoP proof is optional again',
    },
  },
  'app list': {
    usage: 'app list [--owner NAME]',
    about: 'Lists the registered applications: client_id, type, owner, name and redirect URI (never a secret or its hash).',
    options: { owner: ['NAME', "only this user's applications"] },
  },
  'keys list': {
    usage: 'keys list',
    about:
      'Lists the keys id_tokens are signed with: kid, algorithm, state (active: signs; retired: published until the\n' +
      'tokens it signed have expired; expired: about to be removed) and the times it was made, retired and expires.',
  },
  'keys rotate': {
    usage: 'keys rotate',
    about:
      'Makes new ES256 and RS256 signing keys and prints their kids. The keys they replace stop signing (within a\n' +
      'minute in running servers) and stay in the JWKS until every token they signed has expired.',
  },
  'tls init': {
    usage: 'tls init --name NAME... [--json]',
    about:
      'Writes a local CA (ca.crt, ca.key) and a server certificate it signs for the names (server.crt, server.key) under\n' +
      '{SLEEVE_DATA_DIR}/tls/, and prints how to trust the CA. Run again, it keeps the CA and renews the certificate.\n' +
      'The auth listener uses server.crt and server.key when SLEEVE_TLS_CERT is unset.',
    options: { name: ['NAME', 'a host name or IP address the certificate is for (repeat for several), e.g. musicbrainz.lan, coverartarchive.org'] },
  },
  'import musicbrainz': {
    usage: 'import musicbrainz DIR [--skip-malformed] [--restart] [--batch-rows N]',
    about: 'Loads releases, release groups, merged MBIDs and the Cover Art Archive tables from a MusicBrainz dump\n(resumable after an interruption; see docs/import.md).',
    options: {
      'skip-malformed': 'skip and count malformed rows instead of stopping at the first',
      restart: 'discard staged rows of an earlier run and start over',
      'batch-rows': ['N', 'rows staged per committed chunk'],
      'trace-sql': 'print the SQL of the apply step with timings (for diagnosis)',
    },
  },
  'mirror images': {
    usage: 'mirror images [RELEASE_MBID...] [--all] [--sizes 250,500,1200,original] [--concurrency N] [--rate R]',
    about:
      'Fetches the files of imported releases that the store lacks from SLEEVE_UPSTREAM_URL, checks each as pull-through\n' +
      "does and against the md5 of the upstream's _files.xml, and stores it whole. Files in the store are skipped, so a\n" +
      'rerun carries on after an interruption. Exit 0 when all is in the store, 1 when a file failed (see the summary).',
    options: {
      all: 'every release with imported images (instead of naming them)',
      sizes: ['LIST', 'which files, comma-separated: 250, 500, 1200, original (default: all four)'],
      concurrency: ['N', 'files fetched at once (default 8)'],
      rate: ['R', 'at most R files started per second (default: no cap)'],
    },
  },
};

/** The help of one command: usage, what it does, its options and the global ones. */
export function commandHelp(command: Command): string {
  const help = HELP[command.name];
  const lines = [`usage: sleeve ${help?.usage ?? command.name}`, ''];
  if (help !== undefined) lines.push(help.about, '');
  const options = Object.entries(command.options ?? {});
  if (options.length > 0) {
    lines.push('Options:');
    const described = options.map(([name, o]) => {
      const entry = help?.options?.[name];
      const [value, text] = Array.isArray(entry) ? entry : ['VALUE', entry ?? ''];
      return [`--${name}${o.type === 'string' ? ` ${value}` : ''}${o.multiple === true ? ' ...' : ''}`, text] as const;
    });
    const width = Math.max(...described.map(([flag]) => flag.length)) + 3;
    for (const [flag, text] of described) lines.push(`  ${flag.padEnd(width)}${text}`.trimEnd());
    lines.push('');
  }
  lines.push(GLOBAL_OPTIONS, '');
  return lines.join('\n');
}

/** The commands under a first word (`sleeve art --help`), or undefined when no command starts with it. */
export function groupHelp(word: string): string | undefined {
  const lines = USAGE.split('\n').filter((l) => l.startsWith(`  ${word} `));
  if (lines.length === 0) return undefined;
  return `usage: sleeve ${word} SUBCOMMAND ...\n\n${lines.join('\n')}\n\nsleeve ${word} SUBCOMMAND --help describes one of them.\n`;
}

/** sleeve's version, from its package.json (the nearest one above this module, in the checkout or the package). */
export function version(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'sleeve' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not here: look one level up
    }
    const up = path.dirname(dir);
    if (up === dir) return 'unknown';
    dir = up;
  }
}
