/*
 * Cover art edits (docs/decisions.md, "Cover art edits and approval"): every change to cover
 * art, by the operator's CLI, a page or the write API, is one row of cover_art_edit, with who
 * made it, when, what it touched before and after, and its status. This file keeps the
 * records; catalogue.ts makes the changes and approval.ts closes pending edits.
 */
import { sql } from 'kysely';
import type { CoverArtEditTable } from '../../db/schema.js';
import { AppError, invalidInput, notFound } from '../../shared/errors.js';
import type { Queryable } from './repo.js';

/**
 * Who makes a change: an account of the authorization service, as the website layer knows it
 * (this module never reads accounts), with whether it holds the approver role. Null or absent
 * wherever an editor is taken: the operator, through the CLI.
 */
export interface Editor {
  id: number;
  name: string;
  approver: boolean;
}

export type EditKind = CoverArtEditTable['kind'];
export type EditStatus = CoverArtEditTable['status'];

/** An edit as the CLI, the pages and the API show it. */
export interface Edit {
  id: number;
  kind: EditKind;
  /** The release whose art it changes (and its group), or null for an event's edit. */
  release: string | null;
  release_group: string | null;
  /** The event whose art it changes (the Event Art Archive), or null for a release's edit. */
  event: string | null;
  /** The image the edit is about (add, edit, remove), as a string like a listing's ids. */
  image: string | null;
  /** Null: the operator. */
  editor: { id: number; name: string } | null;
  created: number;
  before: unknown;
  after: unknown;
  /** applied: applied at once; pending: waiting for an approver; approved or rejected by one. */
  status: EditStatus;
  closed: { by: { id: number; name: string } | null; at: number } | null;
  /** The note of whoever closed it (an approver, or its editor withdrawing it). */
  note: string | null;
  /** The editor's own note on the change (the upload page's edit note), or null. */
  edit_note: string | null;
}

/** What a change may say besides its input: who makes it and which listing it was based on. */
export interface ChangeOptions {
  /** Who makes the change; null or absent: the operator. */
  editor?: Editor | null | undefined;
  /** The release's (or event's) revision the change was based on (from artState); another one: CONFLICT. */
  expectRevision?: number | undefined;
  /** The editor's note on the change, stored with its edit (at most EDIT_NOTE_MAX_LENGTH characters). */
  editNote?: string | undefined;
  /** Told of the edit the change recorded: its id, and whether it applied or waits (status). */
  onEdit?: ((edit: Edit) => void) | undefined;
}

/** Sleeve's own edit ids start above this: no MusicBrainz edit id comes near (imported art carries those). */
export const FIRST_EDIT_ID = 1_000_000_001;

/** Whether the change applies at once: always for the operator and approvers, and for everyone under `auto`. */
export function appliesAtOnce(policy: 'auto' | 'review' | undefined, editor: Editor | null | undefined): boolean {
  return policy !== 'review' || editor === null || editor === undefined || editor.approver;
}

interface NewEdit {
  kind: EditKind;
  release?: string | null;
  releaseGroup?: string | null;
  event?: string | null;
  image?: number | null;
  editor: Editor | null | undefined;
  editNote?: string | undefined;
  before?: unknown;
  after?: unknown;
  pending: boolean;
  now: number;
}

/** The longest edit note, in characters (the upload page's field says so too). */
export const EDIT_NOTE_MAX_LENGTH = 2000;

/** An edit note as stored: trimmed, null when empty; INVALID_INPUT when longer than EDIT_NOTE_MAX_LENGTH. */
export function storedEditNote(text: string | undefined): string | null {
  const note = (text ?? '').trim();
  if (note.length > EDIT_NOTE_MAX_LENGTH) throw invalidInput(`the edit note is longer than ${EDIT_NOTE_MAX_LENGTH} characters`);
  return note === '' ? null : note;
}

/**
 * Records an edit inside the change's transaction: its id comes from the edit_id counter (a
 * row taken after the release's or event's row and the catalogue counter, in the order every
 * change takes its locks), so ids are unique across processes and a change rolled back leaves
 * no gap.
 */
export async function recordEdit(trx: Queryable, e: NewEdit): Promise<Edit> {
  const row = await sql<{ value: number }>`UPDATE counter SET value = value + 1 WHERE name = 'edit_id' RETURNING value`.execute(trx);
  const value = row.rows[0]?.value;
  if (value === undefined) throw new Error('counter edit_id is missing; run sleeve migrate');
  const editor = e.editor ?? null;
  const values = {
    id: Number(value),
    kind: e.kind,
    release_gid: e.release ?? null,
    release_group_gid: e.releaseGroup ?? null,
    image: e.image ?? null,
    editor_id: editor?.id ?? null,
    editor_name: editor?.name ?? null,
    created_at: e.now,
    before: e.before === undefined ? null : JSON.stringify(e.before),
    after: e.after === undefined ? null : JSON.stringify(e.after),
    status: e.pending ? ('pending' as const) : ('applied' as const),
    closed_by_id: e.pending ? null : (editor?.id ?? null),
    closed_by_name: e.pending ? null : (editor?.name ?? null),
    closed_at: e.pending ? null : e.now,
    note: null,
    edit_note: storedEditNote(e.editNote),
    event_gid: e.event ?? null,
  };
  await trx.insertInto('cover_art_edit').values(values).execute();
  return toEdit(values);
}

function parseJson(text: string | null): unknown {
  return text === null ? null : (JSON.parse(text) as unknown);
}

type EditRow = CoverArtEditTable;

function toEdit(r: EditRow): Edit {
  return {
    id: Number(r.id),
    kind: r.kind,
    release: r.release_gid,
    release_group: r.release_group_gid,
    event: r.event_gid ?? null,
    image: r.image === null ? null : String(r.image),
    editor: r.editor_id === null ? null : { id: r.editor_id, name: r.editor_name ?? '' },
    created: Number(r.created_at),
    before: parseJson(r.before),
    after: parseJson(r.after),
    status: r.status,
    closed: r.closed_at === null ? null : { by: r.closed_by_id === null ? null : { id: r.closed_by_id, name: r.closed_by_name ?? '' }, at: Number(r.closed_at) },
    note: r.note,
    edit_note: r.edit_note ?? null,
  };
}

/** The edit with this id (a number or its text), or undefined. */
export async function findEdit(db: Queryable, id: number | string): Promise<Edit | undefined> {
  const n = typeof id === 'number' ? id : /^\d{1,15}$/.test(id) ? Number(id) : undefined;
  if (n === undefined || !Number.isSafeInteger(n)) return undefined;
  const row = await db.selectFrom('cover_art_edit').selectAll().where('id', '=', n).executeTakeFirst();
  return row === undefined ? undefined : toEdit(row);
}

/** The edit with this id, or NOT_FOUND. */
export async function requireEdit(db: Queryable, id: number | string): Promise<Edit> {
  const edit = await findEdit(db, id);
  if (edit === undefined) throw notFound(`no edit ${String(id)}`);
  return edit;
}

export interface EditQuery {
  /** A release's MBID: its edits, and those of the releases merged into it. */
  release?: string | undefined;
  /** An event's MBID: its edits, and those of the events merged into it. */
  event?: string | undefined;
  /** An account id, or null for the operator's edits. */
  editorId?: number | null | undefined;
  status?: EditStatus | undefined;
  /** At most this many (1 to 1000; default 50). */
  limit?: number | undefined;
  /** Only edits with a smaller id (the `next` of the page before). */
  before?: number | undefined;
}

export const MAX_EDIT_PAGE = 1000;

/** A release's or an event's MBID and the MBIDs merged into it (their edits are its history). */
async function withMerged(db: Queryable, entity: 'release' | 'event', gid: string): Promise<string[]> {
  const gids = [gid];
  const owner = await db.selectFrom(entity).select('id').where('gid', '=', gid).executeTakeFirst();
  if (owner === undefined) return gids;
  const redirects = entity === 'event' ? 'event_gid_redirect' : 'release_gid_redirect';
  for (const r of await db.selectFrom(redirects).select('gid').where('new_id', '=', owner.id).execute()) gids.push(r.gid);
  return gids;
}

/** Edits, newest first, a page at a time: `next` is the `before` of the next page, or null. */
export async function listEdits(db: Queryable, query: EditQuery = {}): Promise<{ edits: Edit[]; next: number | null }> {
  const limit = query.limit ?? 50;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_EDIT_PAGE) throw invalidInput(`the limit must be a whole number from 1 to ${MAX_EDIT_PAGE}`);
  let q = db.selectFrom('cover_art_edit').selectAll().orderBy('id', 'desc').limit(limit + 1);
  if (query.release !== undefined) q = q.where('release_gid', 'in', await withMerged(db, 'release', query.release));
  if (query.event !== undefined) q = q.where('event_gid', 'in', await withMerged(db, 'event', query.event));
  if (query.editorId !== undefined) q = query.editorId === null ? q.where('editor_id', 'is', null) : q.where('editor_id', '=', query.editorId);
  if (query.status !== undefined) q = q.where('status', '=', query.status);
  if (query.before !== undefined) q = q.where('id', '<', query.before);
  const rows = await q.execute();
  const edits = rows.slice(0, limit).map(toEdit);
  return { edits, next: rows.length > limit ? (edits[edits.length - 1]?.id ?? null) : null };
}

/** Marks a pending edit closed (inside the closing transaction); CONFLICT when someone closed it first. */
export async function closeEdit(trx: Queryable, id: number, status: 'approved' | 'rejected', by: Editor | null, now: number, note: string | undefined): Promise<void> {
  const done = await trx
    .updateTable('cover_art_edit')
    .set({ status, closed_by_id: by?.id ?? null, closed_by_name: by?.name ?? null, closed_at: now, note: note ?? null })
    .where('id', '=', id)
    .where('status', '=', 'pending')
    .executeTakeFirst();
  if (Number(done.numUpdatedRows) === 0) throw new AppError('CONFLICT', `edit ${id} is no longer pending`);
}
