/*
 * The Cover Art Archive's catalogue: releases and their groups (add, merge, a group's cover),
 * and a release's images (add, edit, remove, reorder: art-changes.ts's, given the release).
 */
import { AppError, invalidInput, isStoreUnavailable, notFound } from '../../shared/errors.js';
import type { CoverArtDeps } from '../deps.js';
import { addImageTo, editImageOf, removeImageOf, removeLeftovers, reorderImagesOf, requireMbid, requireOwner, rewriteIndex, type AddInput, type EditInput } from './art-changes.js';
import { RELEASE_ART } from './entity.js';
import { folderKey, imageKey, THUMBNAIL_SIZES } from '../files/keys.js';
import type { ListingImage } from '../listings/listing.js';
import { addToCounters, bumpCatalogueVersion, findRelease, findReleaseGroup, listImages, type Queryable, type ReleaseRef } from './repo.js';
import { appliesAtOnce, recordEdit, type ChangeOptions } from './edits.js';

export type { ImageFields } from './art-changes.js';

async function requireRelease(db: Queryable, text: string): Promise<ReleaseRef> {
  return (await requireOwner(db, RELEASE_ART, text)) as ReleaseRef;
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
 * edit; under review by an ordinary editor it waits for an approver (cover-art/catalogue/approval.ts).
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

export interface AddArtInput extends AddInput {
  release: string;
}

/** Adds an image to a release (art-changes.ts, addImageTo). */
export function addArt(deps: CoverArtDeps, input: AddArtInput, options: ChangeOptions = {}): Promise<ListingImage> {
  return addImageTo(deps, RELEASE_ART, input.release, input, options);
}

export interface EditArtInput extends EditInput {
  release: string;
}

/** Changes a release image's types, comment or approval (art-changes.ts, editImageOf). */
export function editArt(deps: CoverArtDeps, input: EditArtInput, options: ChangeOptions = {}): Promise<ListingImage> {
  return editImageOf(deps, RELEASE_ART, input.release, input, options);
}

/** Removes a release's image (art-changes.ts, removeImageOf). */
export function removeArt(deps: CoverArtDeps, releaseText: string, imageIdText: string, options: ChangeOptions = {}): Promise<{ id: string }> {
  return removeImageOf(deps, RELEASE_ART, releaseText, imageIdText, options);
}

/** Puts a release's images in the given order (art-changes.ts, reorderImagesOf). */
export function reorderArt(deps: CoverArtDeps, releaseText: string, idTexts: string[], options: ChangeOptions = {}): Promise<{ order: string[] }> {
  return reorderImagesOf(deps, RELEASE_ART, releaseText, idTexts, options);
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
  await rewriteIndex(deps, RELEASE_ART, into);
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
