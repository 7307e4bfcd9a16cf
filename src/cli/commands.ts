import { existsSync } from 'node:fs';
import { appendFile, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../config/load.js';
import {
  addImageTo,
  addRelease,
  DEMO,
  editImageOf,
  EVENT_ART,
  finishPendingIndexes,
  findRelease,
  loadDemo,
  mergeRelease,
  reindex,
  RELEASE_ART,
  removeImageOf,
  reorderImagesOf,
  setGroupCover,
  type ArtEntity,
  type ListingImage,
} from '../cover-art/index.js';
import { openDatabase } from '../db/connect.js';
import { databaseFailure } from '../db/failure.js';
import { migrateToLatest } from '../db/migrator.js';
import { invalidInput, isStoreUnavailable, notFound, OperatorError } from '../shared/errors.js';
import { parseMbid } from '../shared/uuid.js';
import { openRuntime, type Runtime } from '../runtime.js';
import { sweepUploadsIfReachable } from '../cover-art/catalogue/uploads.js';
import { addEvent, isEvent, requireEvent, writeEventIndex } from '../cover-art/catalogue/events.js';
import type { Queryable } from '../cover-art/catalogue/repo.js';
import { readCatalogueMark } from '../cluster/mark.js';
import { afterChange, openExisting, type Command, type CommandContext } from './command.js';

// main.ts takes the command types from here, with the commands.
export type { Command, CommandContext } from './command.js';

function want(ctx: CommandContext, count: number, usage: string): string[] {
  if (ctx.args.length !== count) throw invalidInput(`usage: sleeve ${usage}`);
  return ctx.args;
}

function str(ctx: CommandContext, name: string): string | undefined {
  const v = ctx.options[name];
  return typeof v === 'string' ? v : undefined;
}

function list(ctx: CommandContext, name: string): string[] | undefined {
  const v = ctx.options[name];
  return Array.isArray(v) ? v : undefined;
}

/**
 * Opens the runtime for a changing command, finishing index.json files a crashed change
 * left behind (with the store still away those wait for a later pass, and a command that
 * needs the store fails on its own). A command that changed the catalogue returns only
 * once every serving process shows the change (`afterChange`).
 */
export async function withRuntime<T>(
  ctx: CommandContext,
  fn: (rt: Runtime) => Promise<T>,
  /**
   * `rewritesFiles`: the command rewrites index.json files without changing the catalogue (published when it succeeds).
   * `create`: a missing database is made (`sleeve demo`); other commands refuse it (`openExisting`).
   */
  options: { rewritesFiles?: boolean; create?: boolean } = {},
): Promise<T> {
  const config = ctx.config();
  const rt = options.create === true ? await openRuntime(config, { urls: 'published' }) : await openExisting(ctx, { urls: 'published' });
  const warn = (message: string) => ctx.io.stderr.write(`sleeve: warning: ${message}\n`);
  const { baseUrl, musicBrainzUrl } = rt.coverArt.urls;
  if (config.listingUrlsGiven && (baseUrl !== config.baseUrl || musicBrainzUrl !== config.musicBrainzUrl)) {
    warn(
      `SLEEVE_BASE_URL/SLEEVE_MUSICBRAINZ_URL here (${config.baseUrl}, ${config.musicBrainzUrl}) differ from those the servers on this ` +
        `database published (${baseUrl}, ${musicBrainzUrl}); listings are written with the servers'. To change them, restart ` +
        'sleeve serve with the new values: it rewrites every listing at start.',
    );
  }
  let before: number | undefined;
  let finished = 0;
  let rewrote = false;
  try {
    before = await readCatalogueMark(rt.database.db);
    await sweepUploadsIfReachable({ ...rt.coverArt, warn });
    finished = await finishPendingIndexes(rt.coverArt, rt.coverArt.clock.now() - 10_000).catch((err: unknown) => {
      if (!isStoreUnavailable(err)) throw err;
      return 0;
    });
    const result = await fn({ ...rt, coverArt: { ...rt.coverArt, warn } });
    rewrote = options.rewritesFiles === true;
    return result;
  } finally {
    // Also after a failure: part of a change (its commit) may have happened.
    if (before !== undefined) await afterChange(config, rt.database.db, before, finished > 0 || rewrote, warn);
    await rt.close();
  }
}

async function readUpload(ctx: CommandContext, file: string, maxBytes: number): Promise<Buffer> {
  if (file === '-') {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of ctx.io.stdin) {
      size += (chunk as Buffer).length;
      if (size > maxBytes) throw invalidInput(`input exceeds the limit of ${maxBytes} bytes (SLEEVE_UPLOAD_MAX_BYTES)`);
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
  }
  let info;
  try {
    info = await stat(file);
  } catch {
    throw invalidInput(`cannot read ${file}: no such file`);
  }
  if (!info.isFile()) throw invalidInput(`${file} is not a file`);
  if (info.size > maxBytes) throw invalidInput(`${file} is ${info.size} bytes, over the limit of ${maxBytes} bytes (SLEEVE_UPLOAD_MAX_BYTES)`);
  return readFile(file);
}

function describeImage(verb: string, release: string, image: Pick<ListingImage, 'id' | 'types' | 'image'>, entity = 'release'): string {
  const types = image.types.length > 0 ? image.types.join(', ') : 'no type';
  return `${verb} image ${image.id} (${types}) on ${entity} ${release}\n  ${image.image}`;
}

const serveCommand: Command = {
  name: 'serve',
  options: { only: { type: 'string' } },
  async run(ctx) {
    want(ctx, 0, 'serve [--only coverart|auth]');
    const only = str(ctx, 'only');
    if (only !== undefined && only !== 'coverart' && only !== 'auth') throw invalidInput('--only must be coverart or auth');
    const config = ctx.config();
    // Loaded here, so the other commands do not pay for the servers' code at start-up.
    const { serve } = await import('../serve.js');
    const server = await serve(config, { only }).catch((err: unknown) => {
      throw serveFailure(err, config);
    });
    printBanner(config, server.coverArtAddress, server.authAddress, server.demoLoaded, server.metricsAddress);
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) {
        process.stderr.write(`sleeve: ${signal} again, exiting now\n`);
        process.exit(1);
      }
      stopping = true;
      process.stderr.write(`sleeve: ${signal}, finishing requests in flight and stopping\n`);
      // The grace period for requests in flight starts when the listeners close (after SLEEVE_SHUTDOWN_DELAY_MS).
      const force = setTimeout(() => {
        // Past close, something still holds the process open: name what is left, for the bug report.
        const step = server.closing();
        const waiting = step === 'done' ? `still open: ${process.getActiveResourcesInfo().join(', ')}` : `still waiting for ${step}`;
        process.stderr.write(`sleeve: did not stop within ${Math.round((config.shutdownDelayMs + 10_000) / 1000)} s (${waiting}); exiting now\n`);
        process.exit(1);
      }, config.shutdownDelayMs + 10_000);
      force.unref();
      server.close().then(
        () => {
          process.exitCode = 0;
        },
        (err: unknown) => {
          process.stderr.write(`sleeve: error while stopping: ${String(err)}\n`);
          process.exitCode = 1;
        },
      );
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
    return -1;
  },
};

/**
 * The routine ways `serve` fails to start, as one line naming the setting to change: a listen
 * address taken (or not allowed), a TLS file that cannot be read. Other errors as they are.
 */
function serveFailure(err: unknown, config: Readonly<Config>): unknown {
  const { code, port, path: file } = err as { code?: string; port?: number; path?: string };
  const tlsFiles = [
    ['SLEEVE_TLS_CERT', config.tlsCert],
    ['SLEEVE_TLS_KEY', config.tlsKey],
  ] as const;
  const tls = tlsFiles.find(([, configured]) => configured !== undefined && file !== undefined && path.resolve(configured) === path.resolve(file));
  if (tls !== undefined && (code === 'ENOENT' || code === 'EACCES' || code === 'EISDIR')) {
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a folder' : 'permission denied';
    return new OperatorError('UNREADABLE_FILE', `cannot read ${tls[0]} ${file}: ${why}`, { cause: err });
  }
  const reasons: Record<string, string> = {
    EADDRINUSE: 'is in use by another process: stop it, or',
    EACCES: 'may not be listened on by this user (ports below 1024 need privileges):',
    EADDRNOTAVAIL: 'is not an address of this machine:',
  };
  const reason = code === undefined ? undefined : reasons[code];
  if (reason === undefined) return err;
  const listeners = [
    ['SLEEVE_COVERART_LISTEN', config.coverArtListen],
    ['SLEEVE_AUTH_LISTEN', config.authListen],
  ] as const;
  const found = listeners.find(([, listen]) => listen.port === port);
  if (found === undefined) return err;
  const [variable, listen] = found;
  return new OperatorError('CANNOT_LISTEN', `cannot listen on ${listen.host}:${listen.port}: it ${reason} give ${variable} another host:port`, { cause: err });
}

/** Which certificate the auth listener serves, as loadTlsMaterial chooses it. */
function certificateSource(config: Readonly<Config>): string {
  if (config.tlsCert !== undefined) return `certificate ${config.tlsCert}`;
  const fromInit = path.join(config.dataDir, 'tls', 'server.crt');
  return existsSync(fromInit) ? `certificate ${fromInit} from sleeve tls init` : 'a self-signed certificate; see sleeve tls init';
}

function printBanner(config: Readonly<Config>, coverArt: string | undefined, auth: string | undefined, demo: string[], metrics: string | undefined): void {
  const lines = ['', 'sleeve is running.'];
  if (coverArt !== undefined) lines.push(`  cover art:  ${coverArt}  (public URL ${config.baseUrl})`);
  if (auth !== undefined) lines.push(`  auth:       ${auth}  (public URL ${config.authUrl}; ${certificateSource(config)})`);
  if (metrics !== undefined) lines.push(`  metrics:    ${metrics}/metrics  (Prometheus)`);
  if (coverArt !== undefined) {
    const [first] = DEMO.releases;
    // A release of the demo that has a back cover (not every one has).
    const withBack = DEMO.releases.find((r) => r !== first && r.images.some((i) => i.types.includes('Back')));
    const rg = DEMO.chosen.releaseGroup;
    lines.push(demo.length > 0 ? '  demo catalogue loaded; try:' : '  try (if the demo catalogue is loaded):');
    lines.push(`    curl -i ${config.baseUrl}/release/${first?.mbid}/`);
    lines.push(`    curl -i ${config.baseUrl}/release/${first?.mbid}/front-250`);
    lines.push(`    curl -i ${config.baseUrl}/release/${withBack?.mbid}/back`);
    lines.push(`    curl -i ${config.baseUrl}/release-group/${rg}/`);
    lines.push(`    curl -L -o front.jpg ${config.baseUrl}/release-group/${rg}/front-500`);
  }
  process.stderr.write(`${lines.join('\n')}\n\n`);
}

const migrateCommand: Command = {
  name: 'migrate',
  async run(ctx) {
    want(ctx, 0, 'migrate');
    const { database } = ctx.config();
    const handle = await openDatabase(database).catch((err: unknown) => {
      throw databaseFailure(err, database);
    });
    try {
      const applied = await migrateToLatest(handle).catch((err: unknown) => {
        throw databaseFailure(err, database);
      });
      ctx.out(applied.length === 0 ? 'the database is up to date' : `applied ${applied.join(', ')}`, { applied });
    } finally {
      await handle.close();
    }
    return 0;
  },
};

const demoCommand: Command = {
  name: 'demo',
  async run(ctx) {
    want(ctx, 0, 'demo');
    const { added } = await withRuntime(ctx, (rt) => loadDemo(rt.coverArt), { create: true });
    ctx.out(added.length === 0 ? 'the demo catalogue is already loaded' : `loaded demo releases ${added.join(', ')}`, { added });
    return 0;
  },
};

/**
 * Refuses a command that changes releases, release groups or events while the mirror's
 * database is the catalogue (docs/mirror-database.md): they change there, and a change made
 * here would be undone, or outlive the mirror's, at the mirror's whim (an event made here
 * would hold an id the mirror's events use).
 */
function refuseBesideMirror(ctx: CommandContext, what: string): void {
  if (ctx.config().musicBrainzDatabase === undefined) return;
  throw invalidInput(`${what}: the catalogue is the mirror's database (SLEEVE_MUSICBRAINZ_DATABASE_URL); releases, release groups and events change there, not here`);
}

const releaseAdd: Command = {
  name: 'release add',
  options: { 'release-group': { type: 'string' }, title: { type: 'string' }, date: { type: 'string' } },
  async run(ctx) {
    const [mbid = ''] = want(ctx, 1, 'release add MBID --release-group RG_MBID [--title T] [--date YYYY[-MM[-DD]]]');
    refuseBesideMirror(ctx, 'release add');
    const releaseGroup = str(ctx, 'release-group');
    if (releaseGroup === undefined) throw invalidInput('--release-group RG_MBID is required');
    const result = await withRuntime(ctx, (rt) => addRelease(rt.coverArt, { mbid, releaseGroup, title: str(ctx, 'title'), date: str(ctx, 'date') }));
    ctx.out(`added release ${result.mbid} in release group ${result.releaseGroup}`, { release: result.mbid, release_group: result.releaseGroup });
    return 0;
  },
};

const eventAdd: Command = {
  name: 'event add',
  options: { name: { type: 'string' } },
  async run(ctx) {
    const [mbid = ''] = want(ctx, 1, 'event add MBID [--name NAME]');
    refuseBesideMirror(ctx, 'event add');
    const result = await withRuntime(ctx, (rt) => addEvent(rt.coverArt, { mbid, name: str(ctx, 'name') }));
    ctx.out(`added event ${result.mbid}`, { event: result.mbid });
    return 0;
  },
};

const releaseMerge: Command = {
  name: 'release merge',
  async run(ctx) {
    const [old = '', into = ''] = want(ctx, 2, 'release merge OLD_MBID INTO_MBID');
    refuseBesideMirror(ctx, 'release merge');
    const result = await withRuntime(ctx, (rt) => mergeRelease(rt.coverArt, old, into));
    const from = parseMbid(old);
    const to = parseMbid(into);
    ctx.out(`merged release ${from} into ${to} (${result.moved.length} images moved)`, { merged: from, into: to, moved: result.moved });
    return 0;
  },
};

const setCover: Command = {
  name: 'release-group set-cover',
  async run(ctx) {
    const [rg = '', release = ''] = want(ctx, 2, 'release-group set-cover RG_MBID RELEASE_MBID');
    refuseBesideMirror(ctx, 'release-group set-cover');
    await withRuntime(ctx, (rt) => setGroupCover(rt.coverArt, rg, release));
    ctx.out(`release group ${parseMbid(rg)} now takes its cover art from release ${parseMbid(release)}`, {
      release_group: parseMbid(rg),
      release: parseMbid(release),
    });
    return 0;
  },
};

/** --approved or --unapproved, or neither (undefined). */
function approvedFlag(ctx: CommandContext): boolean | undefined {
  if (ctx.options.approved === true && ctx.options.unapproved === true) throw invalidInput('--approved and --unapproved contradict each other');
  return ctx.options.approved === true ? true : ctx.options.unapproved === true ? false : undefined;
}

/** --expect-revision N: the revision of the release (sleeve art list) the change is based on. */
function expectedRevision(ctx: CommandContext): number | undefined {
  const text = str(ctx, 'expect-revision');
  if (text === undefined) return undefined;
  if (!/^\d{1,9}$/.test(text)) throw invalidInput('--expect-revision must be a whole number (the revision sleeve art list shows)');
  return Number(text);
}

/** What an art command's MBID names: an event's and no release's is the event's art (cover-art/catalogue/entity.ts), any other the release's. */
async function artOf(db: Queryable, text: string): Promise<ArtEntity> {
  const mbid = parseMbid(text);
  return mbid !== undefined && (await findRelease(db, mbid)) === undefined && (await isEvent(db, mbid)) ? EVENT_ART : RELEASE_ART;
}

const artAdd: Command = {
  name: 'art add',
  options: { type: { type: 'string', multiple: true }, comment: { type: 'string' }, edit: { type: 'string' }, approved: { type: 'boolean' }, unapproved: { type: 'boolean' } },
  async run(ctx) {
    const [release = '', file = ''] = want(ctx, 2, 'art add MBID FILE [--type NAME]... [--comment TEXT] [--edit N] [--approved|--unapproved]');
    const approved = approvedFlag(ctx);
    const editText = str(ctx, 'edit');
    if (editText !== undefined && !/^\d{1,10}$/.test(editText)) throw invalidInput('--edit must be a whole number');
    const config = ctx.config();
    const bytes = await readUpload(ctx, file, config.uploadMaxBytes);
    const edit = editText === undefined ? undefined : Number(editText);
    let entity = 'release';
    const image = await withRuntime(ctx, async (rt) => {
      // An event's MBID (and no release's): the Event Art Archive.
      const art = await artOf(rt.coverArt.db, release);
      entity = art.name;
      return addImageTo(rt.coverArt, art, release, { bytes, types: list(ctx, 'type'), comment: str(ctx, 'comment'), edit, approved });
    });
    ctx.out(describeImage('added', parseMbid(release) ?? release, image, entity), image);
    return 0;
  },
};

const artEdit: Command = {
  name: 'art edit',
  options: {
    type: { type: 'string', multiple: true },
    comment: { type: 'string' },
    approved: { type: 'boolean' },
    unapproved: { type: 'boolean' },
    'expect-revision': { type: 'string' },
  },
  async run(ctx) {
    const [release = '', id = ''] = want(ctx, 2, 'art edit RELEASE_MBID IMAGE_ID [--type NAME]... [--comment TEXT] [--approved|--unapproved] [--expect-revision N]');
    const approved = approvedFlag(ctx);
    const expectRevision = expectedRevision(ctx);
    const types = list(ctx, 'type');
    const comment = str(ctx, 'comment');
    if (types === undefined && comment === undefined && approved === undefined) throw invalidInput('nothing to change: give --type, --comment, --approved or --unapproved');
    let entity = 'release';
    const image = await withRuntime(ctx, async (rt) => {
      const art = await artOf(rt.coverArt.db, release);
      entity = art.name;
      return editImageOf(rt.coverArt, art, release, { imageId: id, types, comment, approved }, { expectRevision });
    });
    ctx.out(describeImage('edited', parseMbid(release) ?? release, image, entity), image);
    return 0;
  },
};

const artRemove: Command = {
  name: 'art remove',
  options: { 'expect-revision': { type: 'string' } },
  async run(ctx) {
    const [release = '', id = ''] = want(ctx, 2, 'art remove RELEASE_MBID IMAGE_ID [--expect-revision N]');
    const expectRevision = expectedRevision(ctx);
    let entity: 'release' | 'event' = 'release';
    const result = await withRuntime(ctx, async (rt) => {
      const art = await artOf(rt.coverArt.db, release);
      entity = art.name;
      return removeImageOf(rt.coverArt, art, release, id, { expectRevision });
    });
    ctx.out(`removed image ${result.id} from ${entity} ${parseMbid(release)}`, { removed: result.id, [entity]: parseMbid(release) });
    return 0;
  },
};

const artReorder: Command = {
  name: 'art reorder',
  options: { 'expect-revision': { type: 'string' } },
  async run(ctx) {
    if (ctx.args.length < 2) throw invalidInput('usage: sleeve art reorder RELEASE_MBID IMAGE_ID... [--expect-revision N]');
    const [release = '', ...ids] = ctx.args;
    const expectRevision = expectedRevision(ctx);
    let entity: 'release' | 'event' = 'release';
    const result = await withRuntime(ctx, async (rt) => {
      const art = await artOf(rt.coverArt.db, release);
      entity = art.name;
      return reorderImagesOf(rt.coverArt, art, release, ids, { expectRevision });
    });
    ctx.out(`new order: ${result.order.join(' ')}`, { [entity]: parseMbid(release), order: result.order });
    return 0;
  },
};

const artReindex: Command = {
  name: 'art reindex',
  async run(ctx) {
    if (ctx.args.length > 1) throw invalidInput('usage: sleeve art reindex [RELEASE_MBID]');
    // index.json files are rewritten though the catalogue does not change: published anyway, for the file caches.
    const result = await withRuntime(ctx, async (rt) => {
      let ids: number[] | undefined;
      if (ctx.args[0] !== undefined) {
        const mbid = parseMbid(ctx.args[0]);
        if (mbid === undefined) throw invalidInput(`release ${JSON.stringify(ctx.args[0])} is not a valid MBID`);
        const release = await findRelease(rt.database.db, mbid);
        if (release === undefined && (await isEvent(rt.database.db, mbid))) {
          // An event's listing, rewritten from the database (no orphan sweep: that is the releases' pass).
          const event = await requireEvent(rt.database.db, mbid);
          await writeEventIndex(rt.coverArt, event.id);
          return { event: event.gid };
        }
        if (release === undefined) throw notFound(`no release ${mbid}`);
        ids = [release.id];
      }
      return reindex({ ...rt.coverArt, now: rt.coverArt.clock.now() }, ids);
    }, { rewritesFiles: true });
    if ('event' in result) {
      ctx.out(`rewrote index.json of event ${result.event}`, result);
      return 0;
    }
    ctx.out(`rewrote index.json of ${result.releases} release(s); removed ${result.orphansRemoved} orphaned file(s)`, result);
    return 0;
  },
};

/**
 * The first line of standard input (without its line ending; a CRLF's CR goes too), for a
 * secret that must not appear on the command line. `what` names it in the messages.
 */
async function readStdinLine(ctx: CommandContext, what: string, example: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.io.stdin) {
    size += (chunk as Buffer).length;
    if (size > 4096) throw invalidInput(`the ${what} on standard input is too long`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  const line = text.split(/\r?\n/)[0] ?? '';
  if (line === '') throw invalidInput(`no ${what} on standard input (use: ${example})`);
  return line;
}

function readPassword(ctx: CommandContext): Promise<string> {
  return readStdinLine(ctx, 'password', 'printf %s "$PASSWORD" | sleeve user add NAME --email E --password-stdin');
}

/**
 * The CLI's audit trail (docs/observability.md, "Audit trail"): each security event is one JSON line shaped
 * like the server's log lines (`level` 30 is info), written when SLEEVE_LOG_LEVEL lets info
 * through, as the server's are. Its log is stderr when that is not a terminal (a service's
 * journal, a script's redirection); on a terminal, where a person reads the command's answer,
 * the line is appended to `audit.log` in the data folder instead (0600), or, when that cannot
 * be written, shown after all: it is never lost.
 */
async function cliAudit(ctx: CommandContext, event: import('../auth/index.js').AuditEvent, fields: import('../auth/index.js').AuditFields): Promise<void> {
  const config = ctx.config();
  if (!['info', 'debug', 'trace'].includes(config.logLevel)) return;
  const { audit } = await import('../auth/index.js');
  let line = '';
  audit({ info: (obj, msg) => (line = `${JSON.stringify({ level: 30, time: Date.now(), ...obj, msg })}\n`) }, event, { ...fields, via: 'cli' });
  if (ctx.io.stderr.isTTY === true) {
    try {
      await appendFile(path.join(config.dataDir, 'audit.log'), line, { mode: 0o600 });
      return;
    } catch {
      // shown below instead
    }
  }
  ctx.io.stderr.write(line);
}

const userAdd: Command = {
  name: 'user add',
  options: {
    email: { type: 'string' },
    'password-stdin': { type: 'boolean' },
    'email-verified': { type: 'boolean' },
    website: { type: 'string' },
    gender: { type: 'string' },
    zoneinfo: { type: 'string' },
    'birth-date': { type: 'string' },
    country: { type: 'string' },
    role: { type: 'string' },
  },
  async run(ctx) {
    const [name = ''] = want(
      ctx,
      1,
      'user add NAME --email EMAIL --password-stdin [--email-verified] [--website URL] [--gender G] [--zoneinfo TZ] [--birth-date YYYY-MM-DD] [--country CC] [--role editor|approver]',
    );
    if (ctx.options['password-stdin'] !== true) throw invalidInput('--password-stdin is required: the password is read from standard input, never from the command line');
    const password = await readPassword(ctx);
    const { addUser } = await import('../auth/index.js');
    const account = await withRuntime(ctx, (rt) =>
      addUser(rt.auth, {
        name,
        email: str(ctx, 'email'),
        emailVerified: ctx.options['email-verified'] === true,
        password,
        website: str(ctx, 'website'),
        gender: str(ctx, 'gender'),
        zoneinfo: str(ctx, 'zoneinfo'),
        birthDate: str(ctx, 'birth-date'),
        country: str(ctx, 'country'),
        role: str(ctx, 'role'),
      }),
    );
    const role = str(ctx, 'role')?.trim().toLowerCase() ?? 'editor';
    await cliAudit(ctx, 'user.created', { user: account.name, reason: role });
    ctx.out(`added user ${account.name}${role === 'approver' ? ' (approver)' : ''}`, { id: account.id, name: account.name, role });
    return 0;
  },
};

const userEdit: Command = {
  name: 'user edit',
  options: { role: { type: 'string' } },
  async run(ctx) {
    const [name = ''] = want(ctx, 1, 'user edit NAME --role editor|approver');
    const roleText = str(ctx, 'role');
    if (roleText === undefined) throw invalidInput('nothing to change: give --role editor|approver');
    const { setUserRole } = await import('../auth/index.js');
    const result = await withRuntime(ctx, (rt) => setUserRole(rt.auth, name, roleText));
    if (result.previous !== result.role) await cliAudit(ctx, 'user.role_changed', { user: result.account.name, reason: result.role });
    const human =
      result.previous === result.role ? `user ${result.account.name} is already ${result.role === 'approver' ? 'an approver' : 'an editor'}` : `user ${result.account.name} is now ${result.role === 'approver' ? 'an approver' : 'an editor'} (was ${result.previous})`;
    ctx.out(human, { id: result.account.id, name: result.account.name, role: result.role, previous: result.previous });
    return 0;
  },
};

const APP_ADD_USAGE =
  'app add --owner NAME --name NAME --type confidential|public [--redirect-uri URI]... [--client-id ID] [--client-secret-stdin] [--resource-server] [--id-token-alg ES256|RS256] [--rotate-refresh-tokens] [--require-dpop]';

const appAdd: Command = {
  name: 'app add',
  options: {
    owner: { type: 'string' },
    name: { type: 'string' },
    type: { type: 'string' },
    'redirect-uri': { type: 'string', multiple: true },
    'client-id': { type: 'string' },
    'client-secret-stdin': { type: 'boolean' },
    'resource-server': { type: 'boolean' },
    'id-token-alg': { type: 'string' },
    'rotate-refresh-tokens': { type: 'boolean' },
    'require-dpop': { type: 'boolean' },
  },
  async run(ctx) {
    want(ctx, 0, APP_ADD_USAGE);
    const ownerName = str(ctx, 'owner');
    if (ownerName === undefined) throw invalidInput('--owner NAME is required');
    const { checkClientId, findAccountByName, registerApp } = await import('../auth/index.js');
    const clientId = str(ctx, 'client-id');
    // Checked before standard input is read: a bad id is refused without waiting for a secret.
    if (clientId !== undefined) checkClientId(clientId);
    const clientSecret = ctx.options['client-secret-stdin'] === true ? await readStdinLine(ctx, 'client secret', 'printf %s "$SECRET" | sleeve app add … --client-secret-stdin') : undefined;
    const result = await withRuntime(ctx, async (rt) => {
      const owner = await findAccountByName(rt.auth, ownerName);
      if (owner === undefined) throw notFound(`no user ${ownerName}; add one with: sleeve user add NAME --email E --password-stdin`);
      return registerApp(rt.auth, {
        ownerId: owner.id,
        name: str(ctx, 'name'),
        kind: str(ctx, 'type'),
        redirectUri: list(ctx, 'redirect-uri'),
        clientId,
        clientSecret,
        resourceServer: ctx.options['resource-server'] === true,
        idTokenAlg: str(ctx, 'id-token-alg'),
        rotateRefresh: ctx.options['rotate-refresh-tokens'] === true,
        requireDpop: ctx.options['require-dpop'] === true,
      });
    });
    await cliAudit(ctx, 'app.registered', { user: ownerName, clientId: result.app.client_id, reason: result.app.resource_server === 1 ? 'resource_server' : undefined });
    // A secret the operator gave is not printed back (they have it); a generated one is shown once.
    const secretLine = clientSecret === undefined ? `${result.clientSecret}  (shown once; stored hashed)` : '(the one given on standard input; stored hashed)';
    ctx.out(
      `registered ${result.app.kind} application ${result.app.name}${result.app.rotate_refresh === 1 ? ' (refresh tokens rotate)' : ''}\n  client_id:     ${result.app.client_id}\n  client_secret: ${secretLine}`,
      { client_id: result.app.client_id, client_secret: result.clientSecret, ...(result.app.rotate_refresh === 1 ? { rotate_refresh_tokens: true } : {}) },
    );
    return 0;
  },
};

const appEdit: Command = {
  name: 'app edit',
  options: {
    name: { type: 'string' },
    'redirect-uri': { type: 'string', multiple: true },
    'resource-server': { type: 'boolean' },
    'no-resource-server': { type: 'boolean' },
    'id-token-alg': { type: 'string' },
    'rotate-refresh-tokens': { type: 'boolean' },
    'no-rotate-refresh-tokens': { type: 'boolean' },
    'require-dpop': { type: 'boolean' },
    'no-require-dpop': { type: 'boolean' },
  },
  async run(ctx) {
    const [clientId = ''] = want(
      ctx,
      1,
      'app edit CLIENT_ID [--name NAME] [--redirect-uri URI]... [--resource-server|--no-resource-server] [--id-token-alg ES256|RS256] [--rotate-refresh-tokens|--no-rotate-refresh-tokens] [--require-dpop|--no-require-dpop]',
    );
    const on = ctx.options['resource-server'] === true;
    const off = ctx.options['no-resource-server'] === true;
    if (on && off) throw invalidInput('--resource-server and --no-resource-server contradict each other');
    const dpopOn = ctx.options['require-dpop'] === true;
    const dpopOff = ctx.options['no-require-dpop'] === true;
    if (dpopOn && dpopOff) throw invalidInput('--require-dpop and --no-require-dpop contradict each other');
    const name = str(ctx, 'name');
    const redirectUri = list(ctx, 'redirect-uri');
    const idTokenAlg = str(ctx, 'id-token-alg');
    const rotate = ctx.options['rotate-refresh-tokens'] === true;
    const noRotate = ctx.options['no-rotate-refresh-tokens'] === true;
    if (rotate && noRotate) throw invalidInput('--rotate-refresh-tokens and --no-rotate-refresh-tokens contradict each other');
    if (name === undefined && redirectUri === undefined && !on && !off && idTokenAlg === undefined && !rotate && !noRotate && !dpopOn && !dpopOff) {
      throw invalidInput(
        'nothing to change: give --name, --redirect-uri, --resource-server, --no-resource-server, --id-token-alg, --rotate-refresh-tokens, --no-rotate-refresh-tokens, --require-dpop or --no-require-dpop',
      );
    }
    const { operatorEditApp, registeredRedirectUris } = await import('../auth/index.js');
    const rotateRefresh = rotate ? true : noRotate ? false : undefined;
    const requireDpop = dpopOn ? true : dpopOff ? false : undefined;
    const app = await withRuntime(ctx, (rt) =>
      operatorEditApp(rt.auth, clientId, { name, redirectUri, resourceServer: on ? true : off ? false : undefined, idTokenAlg, rotateRefresh, requireDpop }),
    );
    await cliAudit(ctx, 'app.changed', { clientId: app.client_id, reason: on ? 'resource_server' : off ? 'not_resource_server' : undefined });
    const resourceServer = app.resource_server === 1;
    ctx.out(`changed application ${app.name} (${app.client_id})${resourceServer ? '; it is a resource server: it may introspect every application\'s tokens' : ''}`, {
      client_id: app.client_id,
      name: app.name,
      redirect_uri: app.redirect_uri,
      redirect_uris: registeredRedirectUris(app),
      resource_server: resourceServer,
      id_token_alg: app.id_token_alg,
      // Said when asked about, or when on (the output of other edits stays as it was).
      ...(rotateRefresh !== undefined || app.rotate_refresh === 1 ? { rotate_refresh_tokens: app.rotate_refresh === 1 } : {}),
      require_dpop: app.require_dpop === 1,
    });
    return 0;
  },
};

const importMusicBrainz: Command = {
  name: 'import musicbrainz',
  options: { 'skip-malformed': { type: 'boolean' }, restart: { type: 'boolean' }, 'batch-rows': { type: 'string' }, 'trace-sql': { type: 'boolean' } },
  async run(ctx) {
    const [dir = ''] = want(ctx, 1, 'import musicbrainz DIR [--skip-malformed] [--restart] [--batch-rows N]');
    refuseBesideMirror(ctx, 'import musicbrainz');
    // Loaded here: the other commands do not pay for the importer at start-up.
    const { runImportCommand } = await import('./import-command.js');
    return runImportCommand(ctx, dir);
  },
};

/** Every command by its name (one or two words). */
export const COMMANDS: Record<string, Command> = Object.fromEntries(
  [
    serveCommand,
    migrateCommand,
    demoCommand,
    releaseAdd,
    eventAdd,
    releaseMerge,
    setCover,
    artAdd,
    artEdit,
    artRemove,
    artReorder,
    artReindex,
    userAdd,
    userEdit,
    appAdd,
    appEdit,
    importMusicBrainz,
  ].map((c) => [c.name, c]),
);
