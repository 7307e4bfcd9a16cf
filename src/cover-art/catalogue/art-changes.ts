/*
 * Changes to the art of a release or an event (entity.ts): add, edit, remove, reorder. Each is
 * an edit (edits.ts); under the review policy an ordinary editor's change waits for an approver
 * (approval.ts closes it). catalogue.ts names the release for its callers; the CLI, the website
 * and the write API name the entity themselves.
 *
 * Every change takes its locks in one order: the owner's row (markChanged: concurrent changes
 * to one release or event take turns, and read each other's orderings), the catalogue counter,
 * then image rows, the edit counter and the metric counters; so concurrent changes wait for
 * each other instead of deadlocking.
 */
import { AppError, invalidInput, isStoreUnavailable, notFound } from '../../shared/errors.js';
import { failpoint } from '../../shared/failpoint.js';
import { parseMbid } from '../../shared/uuid.js';
import type { CoverArtDeps } from '../deps.js';
import { appliesAtOnce, FIRST_EDIT_ID, recordEdit, type ChangeOptions, type Edit, type Editor } from './edits.js';
import type { ArtEntity, ArtListing, EntityRef, EntryOf } from './entity.js';
import { idForTime, parseId } from '../ids.js';
import { imageKey, THUMBNAIL_SIZES, thumbnailPrefix, type ThumbnailSize } from '../files/keys.js';
import { thumbnailDimensionsOf } from '../images/measure.js';
import { addToCounters, allocateImageId, bumpCatalogueVersion, coversNeedApproval, type Queryable } from './repo.js';
import { processImage, type ProcessedImage } from '../images/thumbnails.js';
import { Upload } from './uploads.js';

export function requireMbid(text: string, what: string): string {
  const mbid = parseMbid(text);
  if (mbid === undefined) throw invalidInput(`${what} ${JSON.stringify(text)} is not a valid MBID (a UUID such as 76df3287-6cda-33eb-8e9a-044b5e15ffdd)`);
  return mbid;
}

/** The release or event an MBID names (or the one it was merged into); NOT_FOUND when none. */
export async function requireOwner(db: Queryable, entity: ArtEntity, text: string): Promise<EntityRef> {
  const mbid = requireMbid(text, entity.name);
  const owner = await entity.find(db, mbid);
  if (owner === undefined) throw notFound(entity.missing(mbid));
  return owner;
}

/** The edit's owner: the release's or the event's MBID, in the field that names it. */
function editOwner(entity: ArtEntity, gid: string): { release: string } | { event: string } {
  return entity.name === 'event' ? { event: gid } : { release: gid };
}

/**
 * Flags the owner's index.json for rewriting, moves its revision and tells serving processes
 * the catalogue changed; first in a change's transaction (its row lock orders concurrent
 * changes: PostgreSQL reads committed data per statement, and max(ordering) + 1 would otherwise
 * be computed twice alike). Returns the revision before, for expectRevision.
 */
export async function markChanged(trx: Queryable, entity: ArtEntity, ownerId: number, now: number): Promise<number> {
  const row = await trx
    .updateTable(entity.tables.owner)
    .set((eb) => ({ index_dirty: Math.max(1, now), revision: eb('revision', '+', 1) }))
    .where('id', '=', ownerId)
    .returning('revision')
    .executeTakeFirst();
  await bumpCatalogueVersion(trx);
  return Number(row?.revision ?? 1) - 1;
}

/**
 * Moves the owner's revision for a pending edit opened or closed (its listing stays as it is);
 * returns the revision before. The update takes the owner's row, as a change does.
 */
export async function bumpRevision(trx: Queryable, entity: ArtEntity, ownerId: number): Promise<number> {
  const row = await trx
    .updateTable(entity.tables.owner)
    .set((eb) => ({ revision: eb('revision', '+', 1) }))
    .where('id', '=', ownerId)
    .returning('revision')
    .executeTakeFirst();
  return Number(row?.revision ?? 1) - 1;
}

/** The owner's revision: every change of its art, applied or waiting, moves it (read before a form is checked, given back as expectRevision). */
export async function ownerRevision(db: Queryable, entity: ArtEntity, ownerId: number): Promise<number> {
  const row = await db.selectFrom(entity.tables.owner).select('revision').where('id', '=', ownerId).executeTakeFirst();
  return Number(row?.revision ?? 0);
}

/** Takes the owner's row for a change that applies (markChanged) or one that waits (only the revision moves). */
function takeOwner(trx: Queryable, entity: ArtEntity, ownerId: number, now: number, pending: boolean): Promise<number> {
  return pending ? bumpRevision(trx, entity, ownerId) : markChanged(trx, entity, ownerId, now);
}

/** Refuses a change based on another revision of the owner than the one it had (`previous`). */
function expectRevision(entity: ArtEntity, owner: EntityRef, expected: number | undefined, previous: number): void {
  if (expected === undefined) return;
  if (!Number.isSafeInteger(expected) || expected < 0) throw invalidInput('the expected revision must be a whole number');
  if (previous !== expected) {
    throw new AppError('CONFLICT', `${entity.name} ${owner.gid} changed since revision ${expected} (it is at ${previous}): reload its images and try again`);
  }
}

/** The art types of the entity (Cover Art Archive types, or event art types), by id. */
export async function loadKinds(db: Queryable, entity: ArtEntity): Promise<{ id: number; name: string }[]> {
  return db.selectFrom(entity.tables.kinds).select(['id', 'name']).orderBy('id').execute();
}

/** Type names, any case, to their ids and proper names (id order); an unknown one is refused with the known ones named. */
async function resolveTypes(db: Queryable, entity: ArtEntity, names: string[]): Promise<{ ids: number[]; names: string[] }> {
  const all = await loadKinds(db, entity);
  const ids = new Set<number>();
  for (const name of names) {
    const hit = all.find((t) => t.name.toLowerCase() === name.trim().toLowerCase());
    if (hit === undefined) throw invalidInput(`unknown ${entity.kindNoun} ${JSON.stringify(name)}; known types: ${all.map((t) => t.name).join(', ')}`);
    ids.add(hit.id);
  }
  const sorted = [...ids].sort((a, b) => a - b);
  return { ids: sorted, names: sorted.map((id) => all.find((t) => t.id === id)?.name ?? String(id)) };
}

/** `approved` is the operator's to set by hand; an editor's changes get it from the approval policy. */
function operatorOnly(editor: Editor | null | undefined, what: string, given: boolean): void {
  if (given && editor !== null && editor !== undefined) throw invalidInput(`only the operator sets ${what}; an editor's change is approved by the approval policy`);
}

function parseImageId(text: string): number {
  const id = parseId(text);
  if (id === undefined) throw invalidInput(`image id ${JSON.stringify(text.slice(0, 40))} must be a number as the listing writes it (digits, no leading zero)`);
  return id;
}

async function requireImage(db: Queryable, entity: ArtEntity, owner: EntityRef, idText: string): Promise<{ id: number; suffix: string }> {
  const id = parseImageId(idText);
  const row = await entity.findImage(db, owner.id, id);
  if (row === undefined) throw notFound(`${entity.imageNoun} with id ${id} not found on ${entity.name} ${owner.gid}`);
  return row;
}

/** The image's entry in the owner's listing as the API serves it now. */
async function entryOf<L extends ArtListing>(deps: CoverArtDeps, entity: ArtEntity<L>, owner: EntityRef, id: number): Promise<EntryOf<L>> {
  const listing = entity.listing(deps.urls, owner.gid, await entity.listImages(deps.db, owner.id), coversNeedApproval(deps.approval));
  const entry = listing.images.find((i) => i.id === String(id));
  if (entry === undefined) throw notFound(`${entity.imageNoun} with id ${id} not found`);
  return entry;
}

/**
 * Rewrites the owner's index.json after its change committed. With the store away the change
 * still stands (it was accepted at its commit): the owner keeps its dirty mark, which the next
 * command or a serving process finishes once the store is back, and the caller is warned. False
 * then, so the caller leaves alone what the old index.json names.
 */
export async function rewriteIndex(deps: CoverArtDeps, entity: ArtEntity, owner: EntityRef): Promise<boolean> {
  try {
    await entity.writeIndex(deps, owner.id);
    return true;
  } catch (err) {
    if (!isStoreUnavailable(err)) throw err;
    deps.warn?.(
      `the change is saved, but index.json of ${entity.name} ${owner.gid} could not be rewritten: ${(err as Error).message}. ` +
        'The next sleeve command or a running sleeve serve rewrites it once the store is back.',
    );
    return false;
  }
}

/** Removes files nothing names any more after a commit; with the store away they stay, and the caller is told how to finish. */
export async function removeLeftovers(deps: CoverArtDeps, what: string, keys: string[], remedy: string): Promise<void> {
  try {
    for (const key of keys) await deps.store.delete(key);
  } catch (err) {
    if (!isStoreUnavailable(err)) throw err;
    deps.warn?.(`the change is saved, but ${what} could not be removed: ${(err as Error).message}. ${remedy}`);
  }
}

export interface AddInput {
  bytes: Buffer;
  types?: string[] | undefined;
  comment?: string | undefined;
  /**
   * The operator only: the listing's `edit` names this edit of another system (a MusicBrainz
   * edit, below 1,000,000,000) instead of the sleeve edit that adds the image.
   */
  edit?: number | undefined;
  /** The operator only: approved or not (default: approved, as every change of the operator's). */
  approved?: boolean | undefined;
}

/**
 * Adds an image: checks it, makes its thumbnails, allocates its id, stages the files, records
 * it in one transaction, moves the files to their public names and rewrites the owner's
 * index.json. On any failure before the commit, the staged files are removed and nothing else
 * has changed; a process killed anywhere leaves work the next sweep finishes or removes
 * (cover-art/catalogue/uploads.ts).
 */
export async function addImageTo<L extends ArtListing>(deps: CoverArtDeps, entity: ArtEntity<L>, ownerText: string, input: AddInput, options: ChangeOptions = {}): Promise<EntryOf<L>> {
  if (input.bytes.length > deps.limits.maxBytes) {
    throw invalidInput(`file of ${input.bytes.length} bytes exceeds the limit of ${deps.limits.maxBytes} bytes (SLEEVE_UPLOAD_MAX_BYTES)`);
  }
  const external = input.edit;
  if (external !== undefined && (!Number.isSafeInteger(external) || external < 0 || external >= FIRST_EDIT_ID - 1)) {
    throw invalidInput(`edit must be a whole number from 0 to ${FIRST_EDIT_ID - 2} (from ${FIRST_EDIT_ID - 1} on, edit ids are sleeve's own)`);
  }
  operatorOnly(options.editor, 'edit', external !== undefined);
  operatorOnly(options.editor, 'approved', input.approved !== undefined);
  const owner = await requireOwner(deps.db, entity, ownerText);
  const types = await resolveTypes(deps.db, entity, input.types ?? []);
  const image = await processImage(input.bytes, deps.limits.maxPixels);
  const id = await allocateImageId(deps.db, idForTime(deps.clock.now()));
  let recorded: Edit | undefined;
  // Staged under a leased folder nothing serves until the commit (cover-art/catalogue/uploads.ts): a process
  // killed at any point leaves nothing public, and the next sweep cleans up or finishes.
  const upload = await Upload.begin(deps, id, image.suffix);
  try {
    await failpoint('upload-leased', String(id));
    await stage(deps, upload, input.bytes, image);
    await failpoint('upload-staged', String(id));
    if (!(await upload.held())) throw new AppError('CONFLICT', `the upload of image ${id} was given up while this process was stopped; try again`);
    recorded = await commitImage(deps, entity, owner, { id, input, image, types }, options);
  } catch (err) {
    await upload.abandon();
    throw err;
  }
  await failpoint('upload-committed', String(id));
  try {
    await upload.finish(owner.gid);
  } catch (err) {
    if (!isStoreUnavailable(err)) throw err;
    deps.warn?.(`image ${id} is saved, but its files could not be moved into place: ${(err as Error).message}. The next sleeve command or a running sleeve serve finishes it once the store is back.`);
  }
  await failpoint('upload-published', String(id));
  options.onEdit?.(recorded);
  await rewriteIndex(deps, entity, owner);
  return entryOf(deps, entity, owner, id);
}

/**
 * Puts the original and its thumbnails under the upload's staging names, side by side: each
 * put is its own atomic, durable write. All of them settle before a failure is acted on, so no
 * put still under way lands after the clean-up has run.
 */
async function stage(deps: CoverArtDeps, upload: Upload, bytes: Buffer, image: ProcessedImage): Promise<void> {
  const files: [ThumbnailSize | undefined, Buffer, string][] = [
    [undefined, bytes, image.mime],
    ...THUMBNAIL_SIZES.map((size): [ThumbnailSize, Buffer, string] => [size, image.thumbnails.get(size) as Buffer, 'image/jpeg']),
  ];
  const puts = await Promise.allSettled(files.map(([size, data, mime]) => deps.store.put(upload.stagedKey(size), data, mime)));
  const failed = puts.find((p): p is PromiseRejectedResult => p.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}

interface NewImage {
  id: number;
  input: AddInput;
  image: ProcessedImage;
  types: { ids: number[]; names: string[] };
}

/** The image's rows and its edit, in one transaction (the owner's row first). */
async function commitImage(deps: CoverArtDeps, entity: ArtEntity, owner: EntityRef, n: NewImage, options: ChangeOptions): Promise<Edit> {
  const { id, input, image, types } = n;
  const pending = !appliesAtOnce(deps.approval, options.editor);
  const t = entity.tables;
  return deps.db.transaction().execute(async (trx) => {
    expectRevision(entity, owner, options.expectRevision, await markChanged(trx, entity, owner.id, deps.clock.now()));
    const current = await entity.find(trx, owner.gid);
    if (current?.id !== owner.id) throw new AppError('CONFLICT', `${entity.name} ${owner.gid} changed during the upload (merged?); try again`);
    const approved = pending ? false : (input.approved ?? true);
    const after = { types: types.names, comment: input.comment ?? '', approved, ...(input.edit === undefined ? {} : { edit: input.edit }) };
    const edit = await recordEdit(trx, { kind: 'add', ...editOwner(entity, owner.gid), image: id, editor: options.editor, editNote: options.editNote, after, pending, now: deps.clock.now() });
    const last = await trx.selectFrom(t.art).select((eb) => eb.fn.max('ordering').as('max')).where(t.column, '=', owner.id).executeTakeFirst();
    await trx
      .insertInto(t.art)
      .values({
        id,
        // The owner column: `release`, or `event` in event_art (entity.ts, ArtTables).
        [t.column]: owner.id,
        comment: input.comment ?? '',
        edit: input.edit ?? edit.id,
        ordering: Number(last?.max ?? 0) + 1,
        approved: approved ? 1 : 0,
        mime_type: image.mime,
        date_uploaded: deps.clock.now(),
        filesize: input.bytes.length,
        thumb_250_filesize: image.thumbnails.get(250)?.length ?? null,
        thumb_500_filesize: image.thumbnails.get(500)?.length ?? null,
        thumb_1200_filesize: image.thumbnails.get(1200)?.length ?? null,
        // The listing's additive fields (cover-art/images/measure.ts): as displayed, and the thumbnails as made.
        width: image.width,
        height: image.height,
        stored_size: input.bytes.length,
        thumbnail_dimensions: thumbnailDimensionsOf(image.thumbnails),
      })
      .execute();
    if (types.ids.length > 0) await trx.insertInto(t.types).values(types.ids.map((type_id) => ({ id, type_id }))).execute();
    await addToCounters(trx, { images: entity.counted ? 1 : 0, uploads_total: 1, upload_bytes_total: input.bytes.length });
    return edit;
  });
}

/** What an edit of an image changes (an edit's `after`), and what it was (its `before`). */
export interface ImageFields {
  types?: string[];
  comment?: string;
  approved?: boolean;
}

/** An image's current types, comment and approval. */
export async function imageFields(db: Queryable, entity: ArtEntity, imageId: number): Promise<Required<ImageFields>> {
  const t = entity.tables;
  const row = await db.selectFrom(t.art).select(['comment', 'approved']).where('id', '=', imageId).executeTakeFirstOrThrow();
  const typeIds = (await db.selectFrom(t.types).select('type_id').where('id', '=', imageId).orderBy('type_id').execute()).map((r) => r.type_id);
  const kinds = typeIds.length === 0 ? [] : await loadKinds(db, entity);
  return { types: typeIds.map((id) => kinds.find((k) => k.id === id)?.name ?? String(id)), comment: row.comment, approved: row.approved === 1 };
}

/** Writes an image's fields (inside the change's transaction, after markChanged). */
export async function applyImageFields(trx: Queryable, entity: ArtEntity, imageId: number, fields: ImageFields): Promise<void> {
  const t = entity.tables;
  const set: { comment?: string; approved?: number } = {};
  if (fields.comment !== undefined) set.comment = fields.comment;
  if (fields.approved !== undefined) set.approved = fields.approved ? 1 : 0;
  if (Object.keys(set).length > 0) await trx.updateTable(t.art).set(set).where('id', '=', imageId).execute();
  if (fields.types !== undefined) {
    const typeIds = (await resolveTypes(trx, entity, fields.types)).ids;
    await trx.deleteFrom(t.types).where('id', '=', imageId).execute();
    if (typeIds.length > 0) await trx.insertInto(t.types).values(typeIds.map((type_id) => ({ id: imageId, type_id }))).execute();
  }
}

export interface EditInput {
  imageId: string;
  types?: string[] | undefined;
  comment?: string | undefined;
  /** The operator only. */
  approved?: boolean | undefined;
}

/**
 * Changes an image's types (replacing them when given), comment or approval (the operator
 * only). Recorded as an edit; under review by an ordinary editor it waits for an approver and
 * the image is answered as it still is.
 */
export async function editImageOf<L extends ArtListing>(deps: CoverArtDeps, entity: ArtEntity<L>, ownerText: string, input: EditInput, options: ChangeOptions = {}): Promise<EntryOf<L>> {
  operatorOnly(options.editor, 'approved', input.approved !== undefined);
  const pending = !appliesAtOnce(deps.approval, options.editor);
  const owner = await requireOwner(deps.db, entity, ownerText);
  const after: ImageFields = {};
  if (input.types !== undefined) after.types = (await resolveTypes(deps.db, entity, input.types)).names;
  if (input.comment !== undefined) after.comment = input.comment;
  if (input.approved !== undefined) after.approved = input.approved;
  if (Object.keys(after).length === 0) throw invalidInput('nothing to change: give types, a comment or approved');
  const { image, edit } = await deps.db.transaction().execute(async (trx) => {
    expectRevision(entity, owner, options.expectRevision, await takeOwner(trx, entity, owner.id, deps.clock.now(), pending));
    const image = await requireImage(trx, entity, owner, input.imageId);
    const current = await imageFields(trx, entity, image.id);
    const before: ImageFields = {};
    for (const key of Object.keys(after) as (keyof ImageFields)[]) Object.assign(before, { [key]: current[key] });
    if (!pending) await applyImageFields(trx, entity, image.id, after);
    const edit = await recordEdit(trx, { kind: 'edit', ...editOwner(entity, owner.gid), image: image.id, editor: options.editor, editNote: options.editNote, before, after, pending, now: deps.clock.now() });
    return { image, edit };
  });
  options.onEdit?.(edit);
  if (!pending) await rewriteIndex(deps, entity, owner);
  return entryOf(deps, entity, owner, image.id);
}

/**
 * Removes an image: the row first, then the listing, then its files. Recorded as an edit;
 * under review by an ordinary editor it waits for an approver and the image stays.
 */
export async function removeImageOf(deps: CoverArtDeps, entity: ArtEntity, ownerText: string, imageIdText: string, options: ChangeOptions = {}): Promise<{ id: string }> {
  const pending = !appliesAtOnce(deps.approval, options.editor);
  const owner = await requireOwner(deps.db, entity, ownerText);
  const { image, edit } = await deps.db.transaction().execute(async (trx) => {
    expectRevision(entity, owner, options.expectRevision, await takeOwner(trx, entity, owner.id, deps.clock.now(), pending));
    const image = await requireImage(trx, entity, owner, imageIdText);
    const before = await imageFields(trx, entity, image.id);
    if (!pending) await deleteImage(trx, entity, owner.id, image.id);
    const edit = await recordEdit(trx, { kind: 'remove', ...editOwner(entity, owner.gid), image: image.id, editor: options.editor, editNote: options.editNote, before, pending, now: deps.clock.now() });
    return { image, edit };
  });
  options.onEdit?.(edit);
  if (!pending) await afterRemoval(deps, entity, owner, image);
  return { id: String(image.id) };
}

/** Deletes an image's rows (inside the change's transaction, after markChanged). */
export async function deleteImage(trx: Queryable, entity: ArtEntity, ownerId: number, imageId: number): Promise<void> {
  await trx.deleteFrom(entity.tables.types).where('id', '=', imageId).execute();
  await trx.deleteFrom(entity.tables.art).where('id', '=', imageId).execute();
  const rest = await trx.selectFrom(entity.tables.art).select(['id', 'ordering']).where(entity.tables.column, '=', ownerId).orderBy('ordering').orderBy('id').execute();
  await setOrdering(
    trx,
    entity,
    rest.map((r) => Number(r.id)),
    rest.map((r) => r.ordering),
  );
  await addToCounters(trx, { images: entity.counted ? -1 : 0, image_removals_total: 1 });
}

/** After a removal committed: the listing, then the image's files. */
export async function afterRemoval(deps: CoverArtDeps, entity: ArtEntity, owner: EntityRef, image: { id: number; suffix: string }): Promise<void> {
  // While the old index.json may still name the image, its files stay (art reindex removes them later).
  if (!(await rewriteIndex(deps, entity, owner))) return;
  const keys = [undefined, ...THUMBNAIL_SIZES].map((size) => imageKey(owner.gid, image.id, image.suffix, size));
  // And the sizes and formats made on demand (derivatives.ts), found by their names' prefix.
  try {
    for (const key of await deps.store.list(thumbnailPrefix(owner.gid, image.id))) if (!keys.includes(key)) keys.push(key);
  } catch (err) {
    if (!isStoreUnavailable(err)) throw err;
  }
  await removeLeftovers(deps, `the files of image ${image.id}`, keys, 'sleeve art reindex removes them once the store is back.');
}

/** Renumbers the images 1..n in the order given (only those whose ordering changes are written). */
export async function setOrdering(trx: Queryable, entity: ArtEntity, ids: number[], current: number[] = []): Promise<void> {
  for (const [i, id] of ids.entries()) {
    if (current[i] !== i + 1) await trx.updateTable(entity.tables.art).set({ ordering: i + 1 }).where('id', '=', id).execute();
  }
}

/** The ids of the owner's images in listing order. */
export async function currentOrder(db: Queryable, entity: ArtEntity, ownerId: number): Promise<number[]> {
  const rows = await db.selectFrom(entity.tables.art).select('id').where(entity.tables.column, '=', ownerId).orderBy('ordering').orderBy('id').execute();
  return rows.map((r) => Number(r.id));
}

/**
 * Puts the owner's images in the given order; every image must be named once. Recorded as an
 * edit; under review by an ordinary editor it waits for an approver, and the order stays.
 */
export async function reorderImagesOf(deps: CoverArtDeps, entity: ArtEntity, ownerText: string, idTexts: string[], options: ChangeOptions = {}): Promise<{ order: string[] }> {
  const pending = !appliesAtOnce(deps.approval, options.editor);
  const owner = await requireOwner(deps.db, entity, ownerText);
  const ids = idTexts.map(parseImageId);
  const edit = await deps.db.transaction().execute(async (trx) => {
    expectRevision(entity, owner, options.expectRevision, await takeOwner(trx, entity, owner.id, deps.clock.now(), pending));
    const existing = await currentOrder(trx, entity, owner.id);
    const given = new Set(ids);
    if (given.size !== ids.length) throw invalidInput('an image id is named more than once');
    const missing = existing.filter((id) => !given.has(id));
    const unknown = ids.filter((id) => !existing.includes(id));
    if (unknown.length > 0) throw notFound(`${entity.imageNoun} with id ${unknown.join(', ')} not found on ${entity.name} ${owner.gid}`);
    if (missing.length > 0) throw invalidInput(`every image of the ${entity.name} must be named; missing: ${missing.join(' ')}`);
    if (!pending) await setOrdering(trx, entity, ids);
    const before = { order: existing.map(String) };
    return recordEdit(trx, { kind: 'reorder', ...editOwner(entity, owner.gid), editor: options.editor, editNote: options.editNote, before, after: { order: ids.map(String) }, pending, now: deps.clock.now() });
  });
  options.onEdit?.(edit);
  if (!pending) await rewriteIndex(deps, entity, owner);
  return { order: ids.map(String) };
}
