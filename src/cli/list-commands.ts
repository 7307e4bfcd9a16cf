/*
 * The read-only listing commands: `release list`, `art list`, `user list`, `app list`.
 * Each prints a line per row, or one JSON value with --json. They never show a secret or
 * a hash (client secrets, password hashes): only the columns named here are read.
 */
import { artState, EVENT_ART, releaseArt } from '../cover-art/index.js';
import type { Runtime } from '../runtime.js';
import { invalidInput, notFound } from '../shared/errors.js';
import { parseMbid } from '../shared/uuid.js';
import { openExisting, type Command, type CommandContext } from './command.js';

/** Runs `fn` on a runtime opened for a read-only command, closed after. */
export async function withReadRuntime<T>(ctx: CommandContext, fn: (rt: Runtime) => Promise<T>): Promise<T> {
  const rt = await openExisting(ctx);
  try {
    return await fn(rt);
  } finally {
    await rt.close();
  }
}

function noArgs(ctx: CommandContext, usage: string): void {
  if (ctx.args.length !== 0) throw invalidInput(`usage: sleeve ${usage}`);
}

/** Columns padded to the widest value, the last one left as it is. */
export function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ').trimEnd()).join('\n');
}

export function isoTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function partialDate(y: number | null, m: number | null, d: number | null): string | null {
  if (y === null) return null;
  return [String(y).padStart(4, '0'), ...(m === null ? [] : [String(m).padStart(2, '0')]), ...(m === null || d === null ? [] : [String(d).padStart(2, '0')])].join('-');
}

const MAX_LIMIT = 10_000;

const releaseList: Command = {
  name: 'release list',
  options: { after: { type: 'string' }, limit: { type: 'string' } },
  async run(ctx) {
    noArgs(ctx, 'release list [--after MBID] [--limit N]');
    const limitText = typeof ctx.options.limit === 'string' ? ctx.options.limit : '100';
    if (!/^\d{1,5}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > MAX_LIMIT) throw invalidInput(`--limit must be a whole number from 1 to ${MAX_LIMIT}`);
    const limit = Number(limitText);
    const afterText = typeof ctx.options.after === 'string' ? ctx.options.after : undefined;
    const after = afterText === undefined ? undefined : parseMbid(afterText);
    if (afterText !== undefined && after === undefined) throw invalidInput(`--after ${JSON.stringify(afterText)} is not a valid MBID`);
    const rows = await withReadRuntime(ctx, (rt) => {
      let q = rt.database.db
        .selectFrom('release as r')
        .innerJoin('release_group as g', 'g.id', 'r.release_group')
        .select((eb) => [
          'r.gid',
          'r.name',
          'r.date_year',
          'r.date_month',
          'r.date_day',
          'g.gid as group_gid',
          eb.selectFrom('cover_art').select((c) => c.fn.countAll<number>().as('n')).whereRef('cover_art.release', '=', 'r.id').as('images'),
        ])
        .orderBy('r.gid')
        // One more than asked: whether there is a next page.
        .limit(limit + 1);
      if (after !== undefined) q = q.where('r.gid', '>', after);
      return q.execute();
    });
    const page = rows.slice(0, limit).map((r) => ({
      mbid: r.gid,
      release_group: r.group_gid,
      title: r.name,
      date: partialDate(r.date_year, r.date_month, r.date_day),
      images: Number(r.images ?? 0),
    }));
    const next = rows.length > limit ? (page[page.length - 1]?.mbid ?? null) : null;
    const human =
      page.length === 0
        ? 'no releases'
        : table([['MBID', 'RELEASE GROUP', 'IMAGES', 'DATE', 'TITLE'], ...page.map((r) => [r.mbid, r.release_group, String(r.images), r.date ?? '-', r.title])]) +
          (next === null ? '' : `\n(more: sleeve release list --after ${next}${limit === 100 ? '' : ` --limit ${limit}`})`);
    ctx.out(human, { releases: page, next });
    return 0;
  },
};

/** A listing's images as `art list` shows them. */
function imageTable(images: { id: string; types: string[]; approved: boolean; comment: string; image: string }[], none: string): string {
  if (images.length === 0) return none;
  return table([
    ['ID', 'TYPES', 'APPROVED', 'COMMENT', 'IMAGE'],
    ...images.map((i) => [i.id, i.types.length === 0 ? '-' : i.types.join(','), i.approved ? 'yes' : 'no', i.comment === '' ? '-' : JSON.stringify(i.comment), i.image]),
  ]);
}

const artList: Command = {
  name: 'art list',
  async run(ctx) {
    if (ctx.args.length !== 1) throw invalidInput('usage: sleeve art list RELEASE_MBID');
    const text = ctx.args[0] as string;
    const mbid = parseMbid(text);
    if (mbid === undefined) throw invalidInput(`release ${JSON.stringify(text)} is not a valid MBID`);
    const art = await withReadRuntime(ctx, async (rt) => {
      const art = await releaseArt(rt.coverArt, mbid);
      if (art !== undefined) return art;
      // An event's MBID: the Event Art Archive's images.
      const event = await artState(rt.coverArt, EVENT_ART, mbid);
      if (event !== undefined) return { event: event.gid, ...event };
      throw notFound(`no release ${mbid}`);
    });
    const [entity, gid] = 'event' in art ? ['event', art.event] : ['release', art.release];
    const { images } = art.listing;
    const human =
      imageTable(images, `${entity} ${gid} has no images`) +
      `\nrevision ${art.revision}` +
      (art.pending.length === 0 ? '' : `; pending edits: ${art.pending.map((e) => `${e.id} (${e.kind})`).join(', ')}`);
    // `pending`: the ids of the edits waiting for an approver (sleeve edit show ID).
    ctx.out(human, { [entity]: gid, images, revision: art.revision, pending: art.pending.map((e) => e.id) });
    return 0;
  },
};

const userList: Command = {
  name: 'user list',
  async run(ctx) {
    noArgs(ctx, 'user list');
    const rows = await withReadRuntime(ctx, (rt) =>
      rt.database.db.selectFrom('account').select(['id', 'name', 'email', 'email_verified', 'role', 'created_at']).orderBy('id').execute(),
    );
    const users = rows.map((r) => ({ id: r.id, name: r.name, email: r.email, email_verified: r.email_verified === 1, role: r.role, created: isoTime(r.created_at) }));
    const human =
      users.length === 0
        ? 'no users'
        : table([['ID', 'NAME', 'EMAIL', 'VERIFIED', 'ROLE', 'CREATED'], ...users.map((u) => [String(u.id), u.name, u.email ?? '-', u.email_verified ? 'yes' : 'no', u.role, u.created])]);
    ctx.out(human, { users });
    return 0;
  },
};

const appList: Command = {
  name: 'app list',
  options: { owner: { type: 'string' } },
  async run(ctx) {
    noArgs(ctx, 'app list [--owner NAME]');
    const owner = typeof ctx.options.owner === 'string' ? ctx.options.owner : undefined;
    const rows = await withReadRuntime(ctx, async (rt) => {
      let q = rt.database.db
        .selectFrom('oauth_application as a')
        .innerJoin('account as u', 'u.id', 'a.owner_id')
        .select(['a.client_id', 'a.name', 'a.kind', 'a.redirect_uri', 'a.created_at', 'a.id_token_alg', 'a.rotate_refresh', 'u.name as owner'])
        .orderBy('a.id');
      if (owner !== undefined) {
        const found = await rt.database.db.selectFrom('account').select('id').where('name_key', '=', owner.normalize('NFC').trim().toLowerCase()).executeTakeFirst();
        if (found === undefined) throw notFound(`no user ${owner}`);
        q = q.where('a.owner_id', '=', found.id);
      }
      return q.execute();
    });
    // The column holds the registered redirect URIs one per line: `redirect_uri` is the first, `redirect_uris` all.
    const apps = rows.map((r) => ({ client_id: r.client_id, name: r.name, type: r.kind, owner: r.owner, redirect_uri: r.redirect_uri?.split('\n')[0] ?? null, redirect_uris: r.redirect_uri?.split('\n') ?? [], id_token_alg: r.id_token_alg, created: isoTime(r.created_at), ...(r.rotate_refresh === 1 ? { rotate_refresh_tokens: true } : {}) }));
    const human =
      apps.length === 0
        ? 'no applications'
        : table(appRows(apps));
    ctx.out(human, { applications: apps });
    return 0;
  },
};

/** The app list table; its ROTATION column only when some application rotates its refresh tokens. */
function appRows(apps: { client_id: string; type: string; owner: string; name: string; redirect_uris: string[]; id_token_alg: string; rotate_refresh_tokens?: boolean }[]): string[][] {
  const rotation = apps.some((a) => a.rotate_refresh_tokens === true);
  const head = ['CLIENT_ID', 'TYPE', 'OWNER', 'NAME', 'REDIRECT URIS', 'ID TOKEN', ...(rotation ? ['ROTATION'] : [])];
  return [head, ...apps.map((a) => [a.client_id, a.type, a.owner, a.name, a.redirect_uris.join(' ') || '-', a.id_token_alg, ...(rotation ? [a.rotate_refresh_tokens === true ? 'yes' : 'no'] : [])])];
}

/** The listing commands by name, merged with the others' in main.ts. */
export const LIST_COMMANDS: Record<string, Command> = Object.fromEntries([releaseList, artList, userList, appList].map((c) => [c.name, c]));
