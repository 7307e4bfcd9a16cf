import { AppError, invalidInput, isStoreUnavailable, notFound } from '../shared/errors.js';
import { parseMbid } from '../shared/uuid.js';
import type { CoverArtDeps } from './deps.js';
import { idForTime, parseId } from './ids.js';
import { writeIndex } from './indexer.js';
import { folderKey, imageKey, THUMBNAIL_SIZES, thumbnailPrefix, type ThumbnailSize } from './keys.js';
import { buildListing, type ListingImage } from './listing.js';
import { thumbnailDimensionsOf } from './measure.js';
import {
  addToCounters,
  allocateImageId,
  bumpCatalogueVersion,
  coversNeedApproval,
  findImage,
  findRelease,
  findReleaseGroup,
  listImages,
  loadArtTypes,
  type Queryable,
  type ReleaseRef,
} from './repo.js';
import { appliesAtOnce, bumpRevision, FIRST_EDIT_ID, recordEdit, type ChangeOptions, type Edit, type Editor } from './edits.js';
import { processImage } from './thumbnails.js';
import { Upload } from './uploads.js';
import { failpoint } from '../shared/failpoint.js';

function requireMbid(text: string, what: string): string {
  const mbid = parseMbid(text);
  if (mbid === undefined) throw invalidInput(`${what} ${JSON.stringify(text)} is not a valid MBID (a UUID such as 76df3287-6cda-33eb-8e9a-044b5e15ffdd)`);
  return mbid;
}

async function requireRelease(db: Queryable, text: string): Promise<ReleaseRef> {
  const mbid = requireMbid(text, 'release');
  const release = await findRelease(db, mbid);
  if (release === undefined) throw notFound(`no release ${mbid}; add it first with: sleeve release add ${mbid} --release-group RG_MBID`);
  return release;
}

export interface PartialDate {
  year: number;
  month: number | null;
  day: number | null;
}

/** Parses YYYY, YYYY-MM or YYYY-MM-DD. */
export function parseDate(text: string): PartialDate {
  const m = /^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$/.exec(text);
  const fail = () => invalidInput(`date ${JSON.stringify(text)} must be YYYY, YYYY-MM or YYYY-MM-DD`);
  if (m === null) throw fail();
  const year = Number(m[1]);
  const month = m[2] === undefined ? null : Number(m[2]);
  const day = m[3] === undefined ? null : Number(m[3]);
  if (month !== null && (month < 1 || month > 12)) throw fail();
  if (day !== null && month !== null) {
    const days = new Date(Date.UTC(year, month, 0)).getUTCDate();
    if (day < 1 || day > days) throw fail();
  }
  return { year, month, day };
}

export interface AddReleaseInput {
  mbid: string;
  releaseGroup: string;
  title?: string;
  date?: string;
}

/** Adds a release (and its release group when new). */
export async function addRelease(deps: CoverArtDeps, input: AddReleaseInput): Promise<{ mbid: string; releaseGroup: string }> {
  const mbid = requireMbid(input.mbid, 'release');
  const rgMbid = requireMbid(input.releaseGroup, 'release group');
  const date = input.date === undefined ? undefined : parseDate(input.date);
  return deps.db.transaction().execute(async (trx) => {
    if (await findRelease(trx, mbid)) throw new AppError('CONFLICT', `release ${mbid} already exists`);
    let group = await findReleaseGroup(trx, rgMbid);
    if (group === undefined) {
      group = await trx.insertInto('release_group').values({ gid: rgMbid, name: '' }).returning(['id', 'gid']).executeTakeFirstOrThrow();
    }
    await trx
      .insertInto('release')
      .values({
        gid: mbid,
        release_group: group.id,
        name: input.title ?? '',
        date_year: date?.year ?? null,
        date_month: date?.month ?? null,
        date_day: date?.day ?? null,
      })
      .execute();
    await bumpCatalogueVersion(trx);
    await addToCounters(trx, { releases: 1 });
    return { mbid, releaseGroup: group.gid };
  });
}

/**
 * Makes the editor-chosen release of a group (it must belong to the group). Recorded as an
 * edit; under review by an ordinary editor it waits for an approver (cover-art/approval.ts).
 * With `expectedChosen` (the release chosen when the editor's form was made, null for none),
 * the change is refused with CONFLICT when the choice is another one by then, checked inside
 * the transaction holding the group's row, so two editors choosing from the same state cannot
 * both pass.
 */
export async function setGroupCover(deps: CoverArtDeps, groupText: string, releaseText: string, options: ChangeOptions = {}, expectedChosen?: string | null): Promise<void> {
  const groupMbid = requireMbid(groupText, 'release group');
  const pending = !appliesAtOnce(deps.approval, options.editor);
  const edit = await deps.db.transaction().execute(async (trx) => {
    const group = await findReleaseGroup(trx, groupMbid);
    if (group === undefined) throw notFound(`no release group ${groupMbid}`);
    const release = await requireRelease(trx, releaseText);
    if (release.release_group !== group.id) throw invalidInput(`release ${release.gid} is not in release group ${group.gid}`);
    // The group's row, held to the end (a write that changes nothing): a concurrent choice waits here, then sees this one.
    if (expectedChosen !== undefined) await trx.updateTable('release_group').set((eb) => ({ name: eb.ref('name') })).where('id', '=', group.id).execute();
    const chosen = await trx
      .selectFrom('release_group_cover_art as c')
      .innerJoin('release as r', 'r.id', 'c.release')
      .select('r.gid')
      .where('c.release_group', '=', group.id)
      .executeTakeFirst();
    if (expectedChosen !== undefined && (chosen?.gid ?? null) !== expectedChosen) {
      throw new AppError('CONFLICT', `the cover of release group ${group.gid} changed meanwhile (it comes from ${chosen?.gid ?? 'no chosen release'} now): choose again`);
    }
    if (!pending) await applyGroupCover(trx, group.id, release.id);
    return recordEdit(trx, {
      kind: 'set-cover',
      release: release.gid,
      releaseGroup: group.gid,
      editor: options.editor,
      editNote: options.editNote,
      before: { release: chosen?.gid ?? null },
      after: { release: release.gid },
      pending,
      now: deps.clock.now(),
    });
  });
  options.onEdit?.(edit);
}

/** Stores a group's chosen release (inside the change's transaction). */
export async function applyGroupCover(trx: Queryable, groupId: number, releaseId: number): Promise<void> {
  const updated = await trx.updateTable('release_group_cover_art').set({ release: releaseId }).where('release_group', '=', groupId).executeTakeFirst();
  if (Number(updated.numUpdatedRows) === 0) {
    await trx.insertInto('release_group_cover_art').values({ release_group: groupId, release: releaseId }).execute();
  }
  await bumpCatalogueVersion(trx);
}

/** Resolves type names case-insensitively to art type ids (and their proper names), naming the valid ones on a miss. */
async function resolveTypes(db: Queryable, names: string[]): Promise<{ ids: number[]; names: string[] }> {
  const all = await loadArtTypes(db);
  const ids = new Set<number>();
  for (const name of names) {
    const hit = all.find((t) => t.name.toLowerCase() === name.trim().toLowerCase());
    if (hit === undefined) throw invalidInput(`unknown art type ${JSON.stringify(name)}; known types: ${all.map((t) => t.name).join(', ')}`);
    ids.add(hit.id);
  }
  const sorted = [...ids].sort((a, b) => a - b);
  return { ids: sorted, names: sorted.map((id) => all.find((t) => t.id === id)?.name ?? String(id)) };
}

/** `approved` is the operator's to set by hand; an editor's changes get it from the approval policy. */
function operatorOnly(editor: Editor | null | undefined, what: string, given: boolean): void {
  if (given && editor !== null && editor !== undefined) throw invalidInput(`only the operator sets ${what}; an editor's change is approved by the approval policy`);
}

export interface AddArtInput {
  release: string;
  bytes: Buffer;
  types?: string[];
  comment?: string;
  /**
   * The operator only: the listing's `edit` names this edit of another system (a MusicBrainz
   * edit, below 1,000,000,000) instead of the sleeve edit that adds the image.
   */
  edit?: number;
  /** The operator only: approved or not (default: approved, as every change of the operator's). */
  approved?: boolean;
}

/**
 * Adds an image: checks it, makes its thumbnails, allocates its id, stages the files,
 * records it in one transaction, moves the files to their public names and rewrites the
 * release's index.json. On any failure before the commit, the staged files are removed and
 * nothing else has changed; a process killed anywhere leaves work the next sweep finishes
 * or removes (cover-art/uploads.ts).
 */
export async function addArt(deps: CoverArtDeps, input: AddArtInput, options: ChangeOptions = {}): Promise<ListingImage> {
  if (input.bytes.length > deps.limits.maxBytes) {
    throw invalidInput(`file of ${input.bytes.length} bytes exceeds the limit of ${deps.limits.maxBytes} bytes (SLEEVE_UPLOAD_MAX_BYTES)`);
  }
  const external = input.edit;
  if (external !== undefined && (!Number.isSafeInteger(external) || external < 0 || external >= FIRST_EDIT_ID - 1)) {
    throw invalidInput(`edit must be a whole number from 0 to ${FIRST_EDIT_ID - 2} (from ${FIRST_EDIT_ID - 1} on, edit ids are sleeve's own)`);
  }
  operatorOnly(options.editor, 'edit', external !== undefined);
  operatorOnly(options.editor, 'approved', input.approved !== undefined);
  const pending = !appliesAtOnce(deps.approval, options.editor);
  const release = await requireRelease(deps.db, input.release);
  const types = await resolveTypes(deps.db, input.types ?? []);
  const typeIds = types.ids;
  const image = await processImage(input.bytes, deps.limits.maxPixels);

  const id = await allocateImageId(deps.db, idForTime(deps.clock.now()));
  let recorded: Edit | undefined;
  // Staged under a leased folder nothing serves until the commit (cover-art/uploads.ts): a process
  // killed at any point leaves nothing public, and the next sweep cleans up or finishes.
  const upload = await Upload.begin(deps, id, image.suffix);
  try {
    await failpoint('upload-leased', String(id));
    const files: [ThumbnailSize | undefined, Buffer, string][] = [
      [undefined, input.bytes, image.mime],
      ...THUMBNAIL_SIZES.map((size): [ThumbnailSize, Buffer, string] => [size, image.thumbnails.get(size) as Buffer, 'image/jpeg']),
    ];
    // Side by side: each put is its own atomic, durable write. All of them settle before a
    // failure is acted on, so no put still under way lands after the clean-up has run.
    const puts = await Promise.allSettled(files.map(([size, bytes, mime]) => deps.store.put(upload.stagedKey(size), bytes, mime)));
    const failed = puts.find((p): p is PromiseRejectedResult => p.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    await failpoint('upload-staged', String(id));
    if (!(await upload.held())) throw new AppError('CONFLICT', `the upload of image ${id} was given up while this process was stopped; try again`);
    recorded = await deps.db.transaction().execute(async (trx) => {
      // First, so concurrent changes to the release take turns and read each other's orderings.
      expectRevision(release, options.expectRevision, await markChanged(trx, release.id, deps.clock.now()));
      const current = await findRelease(trx, release.gid);
      if (current?.id !== release.id) throw new AppError('CONFLICT', `release ${release.gid} changed during the upload (merged?); try again`);
      const approved = pending ? false : (input.approved ?? true);
      const edit = await recordEdit(trx, {
        kind: 'add',
        release: release.gid,
        image: id,
        editor: options.editor,
        editNote: options.editNote,
        after: { types: types.names, comment: input.comment ?? '', approved, ...(external === undefined ? {} : { edit: external }) },
        pending,
        now: deps.clock.now(),
      });
      const last = await trx
        .selectFrom('cover_art')
        .select((eb) => eb.fn.max('ordering').as('max'))
        .where('release', '=', release.id)
        .executeTakeFirst();
      await trx
        .insertInto('cover_art')
        .values({
          id,
          release: release.id,
          comment: input.comment ?? '',
          edit: external ?? edit.id,
          ordering: Number(last?.max ?? 0) + 1,
          approved: approved ? 1 : 0,
          mime_type: image.mime,
          date_uploaded: deps.clock.now(),
          filesize: input.bytes.length,
          thumb_250_filesize: image.thumbnails.get(250)?.length ?? null,
          thumb_500_filesize: image.thumbnails.get(500)?.length ?? null,
          thumb_1200_filesize: image.thumbnails.get(1200)?.length ?? null,
          // The listing's additive fields (cover-art/measure.ts): as displayed, and the thumbnails as made.
          width: image.width,
          height: image.height,
          stored_size: input.bytes.length,
          thumbnail_dimensions: thumbnailDimensionsOf(image.thumbnails),
        })
        .execute();
      if (typeIds.length > 0) await trx.insertInto('cover_art_type').values(typeIds.map((type_id) => ({ id, type_id }))).execute();
      await addToCounters(trx, { images: 1, uploads_total: 1, upload_bytes_total: input.bytes.length });
      return edit;
    });
  } catch (err) {
    await upload.abandon();
    throw err;
  }
  await failpoint('upload-committed', String(id));
  try {
    await upload.finish(release.gid);
  } catch (err) {
    if (!isStoreUnavailable(err)) throw err;
    deps.warn?.(
      `image ${id} is saved, but its files could not be moved into place: ${(err as Error).message}. ` +
        'The next sleeve command or a running sleeve serve finishes it once the store is back.',
    );
  }
  await failpoint('upload-published', String(id));
  if (recorded !== undefined) options.onEdit?.(recorded);
  await rewriteIndex(deps, release);
  return entryOf(deps, release, id);
}

/**
 * Rewrites a release's index.json after its change committed. With the store away the
 * change still stands (it was accepted at its commit): the release keeps its dirty mark,
 * which the next command or a serving process finishes once the store is back, and the
 * caller is warned. False then, so the caller leaves alone what the old index.json names.
 */
export async function rewriteIndex(deps: CoverArtDeps, release: { id: number; gid: string }): Promise<boolean> {
  try {
    await writeIndex(deps, release.id);
    return true;
  } catch (err) {
    if (!isStoreUnavailable(err)) throw err;
    deps.warn?.(
      `the change is saved, but index.json of release ${release.gid} could not be rewritten: ${(err as Error).message}. ` +
        'The next sleeve command or a running sleeve serve rewrites it once the store is back.',
    );
    return false;
  }
}

/** Removes files nothing names any more after a commit; with the store away they stay, and the caller is told how to finish. */
async function removeLeftovers(deps: CoverArtDeps, what: string, keys: string[], remedy: string): Promise<void> {
  try {
    for (const key of keys) await deps.store.delete(key);
  } catch (err) {
    if (!isStoreUnavailable(err)) throw err;
    deps.warn?.(`the change is saved, but ${what} could not be removed: ${(err as Error).message}. ${remedy}`);
  }
}

async function entryOf(deps: CoverArtDeps, release: ReleaseRef, id: number): Promise<ListingImage> {
  const listing = buildListing(deps.urls, release.gid, await listImages(deps.db, release.id), coversNeedApproval(deps.approval));
  const entry = listing.images.find((i) => i.id === String(id));
  if (entry === undefined) throw notFound(`cover image with id ${id} not found`);
  return entry;
}

/**
 * Flags the release's index.json for rewriting and tells serving processes the catalogue
 * changed. Called first in a change's transaction: the update takes the release's row
 * lock, so concurrent changes to one release are serialized (PostgreSQL reads committed
 * data per statement, and max(ordering) + 1 would otherwise be computed twice alike), and
 * every change takes its locks in one order (release rows, the catalogue counter, then
 * image rows and the metric counters), so concurrent changes wait for each other instead
 * of deadlocking.
 */
export async function markChanged(trx: Queryable, releaseId: number, now: number): Promise<number> {
  const row = await trx
    .updateTable('release')
    .set((eb) => ({ index_dirty: Math.max(1, now), revision: eb('revision', '+', 1) }))
    .where('id', '=', releaseId)
    .returning('revision')
    .executeTakeFirst();
  await bumpCatalogueVersion(trx);
  return Number(row?.revision ?? 1) - 1;
}

/**
 * Takes the release's row for a change that applies (markChanged) or one that waits for an
 * approver (only the revision moves: the listing stays as it is); returns the revision the
 * release had before, for expectRevision.
 */
async function takeRelease(trx: Queryable, releaseId: number, now: number, pending: boolean): Promise<number> {
  if (!pending) return markChanged(trx, releaseId, now);
  return bumpRevision(trx, releaseId);
}

/** Refuses a change based on another revision of the release than the one it had (`previous`). */
function expectRevision(release: { gid: string }, expected: number | undefined, previous: number): void {
  if (expected === undefined) return;
  if (!Number.isSafeInteger(expected) || expected < 0) throw invalidInput('the expected revision must be a whole number');
  if (previous !== expected) {
    throw new AppError('CONFLICT', `release ${release.gid} changed since revision ${expected} (it is at ${previous}): reload its images and try again`);
  }
}

function parseImageId(text: string): number {
  const id = parseId(text);
  if (id === undefined) throw invalidInput(`image id ${JSON.stringify(text.slice(0, 40))} must be a number as the listing writes it (digits, no leading zero)`);
  return id;
}

async function requireImage(db: Queryable, release: ReleaseRef, idText: string): Promise<{ id: number; suffix: string }> {
  const id = parseImageId(idText);
  const row = await findImage(db, release.id, id);
  if (row === undefined) throw notFound(`cover image with id ${id} not found on release ${release.gid}`);
  return row;
}

export interface EditArtInput {
  release: string;
  imageId: string;
  types?: string[];
  comment?: string;
  /** The operator only. */
  approved?: boolean;
}

/** What an edit of an image changes (an edit's `after`), and what it was (its `before`). */
export interface ImageFields {
  types?: string[];
  comment?: string;
  approved?: boolean;
}

/** An image's current types, comment and approval. */
export async function imageFields(db: Queryable, imageId: number): Promise<Required<ImageFields>> {
  const row = await db.selectFrom('cover_art').select(['comment', 'approved']).where('id', '=', imageId).executeTakeFirstOrThrow();
  const types = await db
    .selectFrom('cover_art_type as t')
    .innerJoin('art_type as a', 'a.id', 't.type_id')
    .select('a.name')
    .where('t.id', '=', imageId)
    .orderBy('t.type_id')
    .execute();
  return { types: types.map((t) => t.name), comment: row.comment, approved: row.approved === 1 };
}

/** Writes an image's fields (inside the change's transaction, after markChanged). */
export async function applyImageFields(trx: Queryable, imageId: number, fields: ImageFields): Promise<void> {
  const set: { comment?: string; approved?: number } = {};
  if (fields.comment !== undefined) set.comment = fields.comment;
  if (fields.approved !== undefined) set.approved = fields.approved ? 1 : 0;
  if (Object.keys(set).length > 0) await trx.updateTable('cover_art').set(set).where('id', '=', imageId).execute();
  if (fields.types !== undefined) {
    const typeIds = (await resolveTypes(trx, fields.types)).ids;
    await trx.deleteFrom('cover_art_type').where('id', '=', imageId).execute();
    if (typeIds.length > 0) await trx.insertInto('cover_art_type').values(typeIds.map((type_id) => ({ id: imageId, type_id }))).execute();
  }
}

/**
 * Changes an image's types (replacing them when given), comment or approval (the operator
 * only). Recorded as an edit; under review by an ordinary editor it waits for an approver and
 * the image is answered as it still is.
 */
export async function editArt(deps: CoverArtDeps, input: EditArtInput, options: ChangeOptions = {}): Promise<ListingImage> {
  operatorOnly(options.editor, 'approved', input.approved !== undefined);
  const pending = !appliesAtOnce(deps.approval, options.editor);
  const release = await requireRelease(deps.db, input.release);
  const after: ImageFields = {};
  if (input.types !== undefined) after.types = (await resolveTypes(deps.db, input.types)).names;
  if (input.comment !== undefined) after.comment = input.comment;
  if (input.approved !== undefined) after.approved = input.approved;
  if (Object.keys(after).length === 0) throw invalidInput('nothing to change: give types, a comment or approved');
  const { image, edit } = await deps.db.transaction().execute(async (trx) => {
    expectRevision(release, options.expectRevision, await takeRelease(trx, release.id, deps.clock.now(), pending));
    const image = await requireImage(trx, release, input.imageId);
    const current = await imageFields(trx, image.id);
    const before: ImageFields = {};
    for (const key of Object.keys(after) as (keyof ImageFields)[]) Object.assign(before, { [key]: current[key] });
    if (!pending) await applyImageFields(trx, image.id, after);
    const edit = await recordEdit(trx, { kind: 'edit', release: release.gid, image: image.id, editor: options.editor, editNote: options.editNote, before, after, pending, now: deps.clock.now() });
    return { image, edit };
  });
  options.onEdit?.(edit);
  if (!pending) await rewriteIndex(deps, release);
  return entryOf(deps, release, image.id);
}

/**
 * Removes an image: the row first, then the listing, then its files. Recorded as an edit;
 * under review by an ordinary editor it waits for an approver and the image stays.
 */
export async function removeArt(deps: CoverArtDeps, releaseText: string, imageIdText: string, options: ChangeOptions = {}): Promise<{ id: string }> {
  const pending = !appliesAtOnce(deps.approval, options.editor);
  const release = await requireRelease(deps.db, releaseText);
  const { image, edit } = await deps.db.transaction().execute(async (trx) => {
    expectRevision(release, options.expectRevision, await takeRelease(trx, release.id, deps.clock.now(), pending));
    const image = await requireImage(trx, release, imageIdText);
    const before = await imageFields(trx, image.id);
    if (!pending) await deleteImage(trx, release.id, image.id);
    const edit = await recordEdit(trx, { kind: 'remove', release: release.gid, image: image.id, editor: options.editor, editNote: options.editNote, before, pending, now: deps.clock.now() });
    return { image, edit };
  });
  options.onEdit?.(edit);
  if (!pending) await afterRemoval(deps, release, image);
  return { id: String(image.id) };
}

/** Deletes an image's rows (inside the change's transaction, after markChanged). */
export async function deleteImage(trx: Queryable, releaseId: number, imageId: number): Promise<void> {
  await trx.deleteFrom('cover_art_type').where('id', '=', imageId).execute();
  await trx.deleteFrom('cover_art').where('id', '=', imageId).execute();
  await resequence(trx, releaseId);
  await addToCounters(trx, { images: -1, image_removals_total: 1 });
}

/** After a removal committed: the listing, then the image's files. */
export async function afterRemoval(deps: CoverArtDeps, release: { id: number; gid: string }, image: { id: number; suffix: string }): Promise<void> {
  // While the old index.json may still name the image, its files stay (art reindex removes them later).
  if (await rewriteIndex(deps, release)) {
    const keys = [undefined, ...THUMBNAIL_SIZES].map((size) => imageKey(release.gid, image.id, image.suffix, size));
    // And the sizes and formats made on demand (derivatives.ts), found by their names' prefix.
    try {
      for (const key of await deps.store.list(thumbnailPrefix(release.gid, image.id))) if (!keys.includes(key)) keys.push(key);
    } catch (err) {
      if (!isStoreUnavailable(err)) throw err;
    }
    await removeLeftovers(deps, `the files of image ${image.id}`, keys, 'sleeve art reindex removes them once the store is back.');
  }
}

/** Renumbers a release's orderings 1..n, keeping their order. */
async function resequence(trx: Queryable, releaseId: number): Promise<void> {
  const rows = await trx.selectFrom('cover_art').select(['id', 'ordering']).where('release', '=', releaseId).orderBy('ordering').orderBy('id').execute();
  await setOrdering(trx, rows.map((r) => r.id), rows.map((r) => r.ordering));
}

export async function setOrdering(trx: Queryable, ids: number[], current: number[] = []): Promise<void> {
  for (const [i, id] of ids.entries()) {
    if (current[i] !== i + 1) await trx.updateTable('cover_art').set({ ordering: i + 1 }).where('id', '=', id).execute();
  }
}

/** The ids of a release's images in listing order. */
export async function currentOrder(db: Queryable, releaseId: number): Promise<number[]> {
  const rows = await db.selectFrom('cover_art').select('id').where('release', '=', releaseId).orderBy('ordering').orderBy('id').execute();
  return rows.map((r) => Number(r.id));
}

/**
 * Puts a release's images in the given order; every image of the release must be named once.
 * Recorded as an edit; under review by an ordinary editor it waits for an approver, and the
 * order stays as it is.
 */
export async function reorderArt(deps: CoverArtDeps, releaseText: string, idTexts: string[], options: ChangeOptions = {}): Promise<{ order: string[] }> {
  const pending = !appliesAtOnce(deps.approval, options.editor);
  const release = await requireRelease(deps.db, releaseText);
  const ids = idTexts.map(parseImageId);
  const edit = await deps.db.transaction().execute(async (trx) => {
    expectRevision(release, options.expectRevision, await takeRelease(trx, release.id, deps.clock.now(), pending));
    const existing = await currentOrder(trx, release.id);
    const given = new Set(ids);
    if (given.size !== ids.length) throw invalidInput('an image id is named more than once');
    const missing = existing.filter((id) => !given.has(id));
    const unknown = ids.filter((id) => !existing.includes(id));
    if (unknown.length > 0) throw notFound(`cover image with id ${unknown.join(', ')} not found on release ${release.gid}`);
    if (missing.length > 0) throw invalidInput(`every image of the release must be named; missing: ${missing.join(' ')}`);
    if (!pending) await setOrdering(trx, ids);
    const before = { order: existing.map(String) };
    return recordEdit(trx, { kind: 'reorder', release: release.gid, editor: options.editor, editNote: options.editNote, before, after: { order: ids.map(String) }, pending, now: deps.clock.now() });
  });
  options.onEdit?.(edit);
  if (!pending) await rewriteIndex(deps, release);
  return { order: ids.map(String) };
}

/**
 * Merges a release into another: the images move (files copied to the target's
 * folder first), the old MBID then resolves to the target, and the old folder goes.
 */
export async function mergeRelease(deps: CoverArtDeps, oldText: string, intoText: string): Promise<{ moved: string[] }> {
  const oldMbid = requireMbid(oldText, 'release');
  const old = await deps.db.selectFrom('release').select(['id', 'gid', 'release_group']).where('gid', '=', oldMbid).executeTakeFirst();
  if (old === undefined) throw notFound(`no release ${oldMbid} (a release already merged cannot be merged again)`);
  const into = await requireRelease(deps.db, intoText);
  if (into.id === old.id) throw invalidInput('a release cannot be merged into itself');

  const images = await listImages(deps.db, old.id);
  const copied: string[] = [];
  try {
    for (const image of images) {
      for (const size of [undefined, ...THUMBNAIL_SIZES]) {
        const from = imageKey(old.gid, image.id, image.suffix, size);
        const to = imageKey(into.gid, image.id, image.suffix, size);
        const object = await deps.store.get(from);
        if (object === undefined) continue;
        const chunks: Buffer[] = [];
        for await (const chunk of object.body) chunks.push(chunk as Buffer);
        copied.push(to);
        await deps.store.put(to, Buffer.concat(chunks), size === undefined ? image.mime_type : 'image/jpeg');
      }
    }
    await deps.db.transaction().execute(async (trx) => {
      // Locks in the order every change takes them: the release rows (here both, lowest id
      // first), then the catalogue counter.
      const dirty = Math.max(1, deps.clock.now());
      for (const id of [old.id, into.id].sort((a, b) => a - b)) {
        await trx.updateTable('release').set((eb) => ({ index_dirty: dirty, revision: eb('revision', '+', 1) })).where('id', '=', id).execute();
      }
      await bumpCatalogueVersion(trx);
      // An image added to the old release since the files were copied would go with its row (ON DELETE CASCADE).
      const current = (await trx.selectFrom('cover_art').select('id').where('release', '=', old.id).execute()).map((r) => r.id);
      if (current.length !== images.length || images.some((i) => !current.includes(i.id))) {
        throw new AppError('CONFLICT', `release ${old.gid} changed during the merge; try again`);
      }
      const last = await trx.selectFrom('cover_art').select((eb) => eb.fn.max('ordering').as('max')).where('release', '=', into.id).executeTakeFirst();
      const offset = Number(last?.max ?? 0);
      for (const [i, image] of images.entries()) {
        await trx.updateTable('cover_art').set({ release: into.id, ordering: offset + i + 1 }).where('id', '=', image.id).execute();
      }
      await trx.updateTable('release_gid_redirect').set({ new_id: into.id }).where('new_id', '=', old.id).execute();
      await trx.insertInto('release_gid_redirect').values({ gid: old.gid, new_id: into.id }).execute();
      await trx
        .updateTable('release_group_cover_art')
        .set({ release: into.id })
        .where('release', '=', old.id)
        .where('release_group', '=', into.release_group)
        .execute();
      await trx.deleteFrom('release_group_cover_art').where('release', '=', old.id).execute();
      await trx.deleteFrom('release').where('id', '=', old.id).execute();
      await addToCounters(trx, { releases: -1 });
    });
  } catch (err) {
    await Promise.all(copied.map((key) => deps.store.delete(key).catch(() => {})));
    throw err;
  }
  await rewriteIndex(deps, into);
  // The old folder is named by nothing now (its MBID resolves to the target).
  const oldFolder = `${folderKey(old.gid)}/`;
  const remedy = `Remove what is left under ${oldFolder} once the store is back.`;
  let leftovers: string[] = [];
  try {
    leftovers = await deps.store.list(oldFolder);
  } catch (err) {
    if (!isStoreUnavailable(err)) throw err;
    deps.warn?.(`the merge is saved, but the old folder ${oldFolder} could not be removed: ${(err as Error).message}. ${remedy}`);
  }
  await removeLeftovers(deps, `the old folder ${oldFolder}`, leftovers, remedy);
  return { moved: images.map((i) => String(i.id)) };
}
