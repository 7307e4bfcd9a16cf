/*
 * The cover art edit history and its approval from the command line: `edit list`, `edit show`,
 * `edit approve`, `edit reject` (docs/website.md, "Edits and approval"). The operator acts: approving
 * or rejecting needs no role.
 */
import { approveEdit, findEdit, listEdits, MAX_EDIT_PAGE, rejectEdit, type Edit, type EditStatus } from '../cover-art/index.js';
import { invalidInput, notFound } from '../shared/errors.js';
import { parseMbid } from '../shared/uuid.js';
import type { Command, CommandContext } from './command.js';
import { withRuntime as withChangingRuntime } from './commands.js';
import { isoTime, table, withReadRuntime } from './list-commands.js';

const STATUSES: readonly EditStatus[] = ['applied', 'pending', 'approved', 'rejected'];

function editorName(edit: Edit): string {
  return edit.editor === null ? '(operator)' : edit.editor.name;
}

/** An edit as --json prints it: times in ISO 8601 (UTC, with milliseconds), as the write API gives them. */
function editJson(e: Edit): Omit<Edit, 'created' | 'closed'> & { created: string; closed: { by: { id: number; name: string } | null; at: string } | null } {
  return { ...e, created: new Date(e.created).toISOString(), closed: e.closed === null ? null : { ...e.closed, at: new Date(e.closed.at).toISOString() } };
}

function oneId(ctx: CommandContext, usage: string): string {
  const [id] = ctx.args;
  if (ctx.args.length !== 1 || id === undefined) throw invalidInput(`usage: sleeve ${usage}`);
  if (!/^\d{1,15}$/.test(id)) throw invalidInput(`edit id ${JSON.stringify(id)} must be a number`);
  return id;
}

const editList: Command = {
  name: 'edit list',
  options: {
    release: { type: 'string' },
    event: { type: 'string' },
    editor: { type: 'string' },
    operator: { type: 'boolean' },
    pending: { type: 'boolean' },
    status: { type: 'string' },
    before: { type: 'string' },
    limit: { type: 'string' },
  },
  async run(ctx) {
    if (ctx.args.length !== 0) throw invalidInput('usage: sleeve edit list [--release MBID|--event MBID] [--editor NAME|--operator] [--pending|--status S] [--before ID] [--limit N]');
    const opt = (name: string) => (typeof ctx.options[name] === 'string' ? (ctx.options[name] as string) : undefined);
    const [release, event] = (['release', 'event'] as const).map((name) => {
      const text = opt(name);
      const mbid = text === undefined ? undefined : parseMbid(text);
      if (text !== undefined && mbid === undefined) throw invalidInput(`--${name} ${JSON.stringify(text)} is not a valid MBID`);
      return mbid;
    });
    if (release !== undefined && event !== undefined) throw invalidInput('--release and --event contradict each other');
    const statusText = ctx.options.pending === true ? 'pending' : opt('status');
    if (ctx.options.pending === true && opt('status') !== undefined && opt('status') !== 'pending') throw invalidInput('--pending and --status contradict each other');
    if (statusText !== undefined && !(STATUSES as readonly string[]).includes(statusText)) throw invalidInput(`--status must be one of ${STATUSES.join(', ')}`);
    const limitText = opt('limit') ?? '50';
    if (!/^\d{1,4}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > MAX_EDIT_PAGE) throw invalidInput(`--limit must be a whole number from 1 to ${MAX_EDIT_PAGE}`);
    const beforeText = opt('before');
    if (beforeText !== undefined && !/^\d{1,15}$/.test(beforeText)) throw invalidInput('--before must be an edit id');
    const editorText = opt('editor');
    if (editorText !== undefined && ctx.options.operator === true) throw invalidInput('--editor and --operator contradict each other');
    const page = await withReadRuntime(ctx, async (rt) => {
      let editorId: number | null | undefined = ctx.options.operator === true ? null : undefined;
      if (editorText !== undefined) {
        const { findAccountByName } = await import('../auth/index.js');
        const account = await findAccountByName(rt.auth, editorText);
        if (account === undefined) throw notFound(`no user ${editorText}`);
        editorId = account.id;
      }
      return listEdits(rt.database.db, {
        release,
        event,
        editorId,
        status: statusText as EditStatus | undefined,
        limit: Number(limitText),
        before: beforeText === undefined ? undefined : Number(beforeText),
      });
    });
    const human =
      page.edits.length === 0
        ? 'no edits'
        : table([
            ['ID', 'STATUS', 'KIND', 'RELEASE', 'IMAGE', 'EDITOR', 'CREATED'],
            // An event's edit names its event in the release's column.
            ...page.edits.map((e) => [String(e.id), e.status, e.kind, e.release ?? (e.event === null ? '-' : `event ${e.event}`), e.image ?? '-', editorName(e), isoTime(e.created)]),
          ]) + (page.next === null ? '' : `\n(more: add --before ${page.next})`);
    ctx.out(human, { ...page, edits: page.edits.map(editJson) });
    return 0;
  },
};

function describeEdit(e: Edit): string {
  const lines = [
    `edit ${e.id}: ${e.kind}, ${e.status}`,
    `  by:       ${editorName(e)}, ${isoTime(e.created)}`,
    ...(e.release === null ? [] : [`  release:  ${e.release}`]),
    ...(e.release_group === null ? [] : [`  group:    ${e.release_group}`]),
    ...(e.event === null ? [] : [`  event:    ${e.event}`]),
    ...(e.image === null ? [] : [`  image:    ${e.image}`]),
    ...(e.before === null ? [] : [`  before:   ${JSON.stringify(e.before)}`]),
    ...(e.after === null ? [] : [`  after:    ${JSON.stringify(e.after)}`]),
  ];
  if (e.closed !== null && e.status !== 'applied') lines.push(`  ${e.status}: by ${e.closed.by === null ? '(operator)' : e.closed.by.name}, ${isoTime(e.closed.at)}`);
  if (e.edit_note !== null) lines.push(`  edit note: ${e.edit_note.replace(/\r?\n/g, '\n             ')}`);
  if (e.note !== null) lines.push(`  note:     ${e.note}`);
  return lines.join('\n');
}

const editShow: Command = {
  name: 'edit show',
  async run(ctx) {
    const id = oneId(ctx, 'edit show ID');
    const edit = await withReadRuntime(ctx, (rt) => findEdit(rt.database.db, id));
    if (edit === undefined) throw notFound(`no edit ${id}`);
    ctx.out(describeEdit(edit), editJson(edit));
    return 0;
  },
};

function closing(verb: 'approve' | 'reject'): Command {
  return {
    name: `edit ${verb}`,
    options: { note: { type: 'string' } },
    async run(ctx) {
      const id = oneId(ctx, `edit ${verb} ID [--note TEXT]`);
      const note = typeof ctx.options.note === 'string' ? ctx.options.note : undefined;
      if (note !== undefined && note.length > 1000) throw invalidInput('--note is at most 1000 characters');
      const close = verb === 'approve' ? approveEdit : rejectEdit;
      const edit = await withChangingRuntime(ctx, (rt) => close(rt.coverArt, id, null, note));
      ctx.out(describeEdit(edit), editJson(edit));
      return 0;
    },
  };
}

/** The edit commands by name, merged with the others' in main.ts. */
export const EDIT_COMMANDS: Record<string, Command> = Object.fromEntries([editList, editShow, closing('approve'), closing('reject')].map((c) => [c.name, c]));
