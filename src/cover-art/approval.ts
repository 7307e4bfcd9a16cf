/*
 * Closing pending edits (docs/decisions.md, "Cover art edits and approval"). Under the
 * `review` policy an ordinary editor's change waits for an approver: an addition is stored
 * at once with `approved: false`; an edit of types or comment, a removal, a reorder and a
 * group's cover choice wait unapplied. Approving applies what waits if what it changes is
 * still as the edit saw it (the image's fields it edits, the image it removes, the images a
 * reorder names and their order among themselves); else CONFLICT, and the edit can only be
 * rejected. Rejecting drops it, and a rejected addition goes with its files, as removeArt
 * removes an image.
 */
import { AppError, invalidInput } from '../shared/errors.js';
import {
  afterRemoval,
  applyGroupCover,
  applyImageFields,
  currentOrder,
  deleteImage,
  imageFields,
  markChanged,
  rewriteIndex,
  setOrdering,
  type ImageFields,
} from './catalogue.js';
import type { ApiDeps, CoverArtDeps } from './deps.js';
import { bumpRevision, closeEdit, listEdits, requireEdit, type Edit, type Editor } from './edits.js';
import { buildListing, type Listing } from './listing.js';
import { coversNeedApproval, findImage, findRelease, findReleaseGroup, listImages, type Queryable, type ReleaseRef } from './repo.js';
import { parseMbid } from '../shared/uuid.js';

/** Null: the operator (CLI), who may close any edit. */
type Approver = Editor | null;

function mayClose(edit: Edit, by: Approver, verb: 'approve' | 'reject'): void {
  if (by === null) return;
  const own = edit.editor?.id === by.id;
  // As on MusicBrainz, nobody votes on their own edit, but an editor may withdraw it (reject).
  if (own && verb === 'reject') return;
  if (!by.approver) throw invalidInput(`${by.name} is not an approver: only approvers ${verb} the edits of others`);
  if (own) throw invalidInput(`edit ${edit.id} is ${by.name}'s own: another approver decides it`);
}

function stale(edit: Edit, why: string): AppError {
  return new AppError('CONFLICT', `edit ${edit.id} cannot be applied: ${why}; reject it instead`);
}

async function releaseOf(trx: Queryable, edit: Edit): Promise<ReleaseRef> {
  const release = edit.release === null ? undefined : await findRelease(trx, edit.release);
  if (release === undefined) throw stale(edit, `release ${edit.release} is gone`);
  return release;
}

async function imageOf(trx: Queryable, edit: Edit, release: ReleaseRef): Promise<{ id: number; suffix: string }> {
  const image = await findImage(trx, release.id, Number(edit.image));
  if (image === undefined) throw stale(edit, `image ${edit.image} is gone`);
  return image;
}

/**
 * The order a pending reorder gives the release as it is now (docs/decisions.md, "A pending
 * reorder is judged by the images it names"). It names the images the release had when it was
 * made: if one of them is gone, or their order among themselves is no longer the one the edit
 * saw (an edit applied since reordered them), it is stale. Otherwise they take the places they
 * hold now in the edit's order, and every image it does not name (added since, or placed by an
 * applied reorder) keeps its place: an image added since stays after them.
 */
function reorderedNow(edit: Edit, current: number[]): number[] {
  const before = (edit.before as { order: string[] }).order.map(Number);
  const after = (edit.after as { order: string[] }).order.map(Number);
  const present = new Set(current);
  const gone = after.filter((id) => !present.has(id));
  if (gone.length > 0) throw stale(edit, `${gone.length === 1 ? 'image' : 'images'} ${gone.join(', ')} ${gone.length === 1 ? 'is' : 'are'} gone`);
  const named = new Set(after);
  const seen = current.filter((id) => named.has(id));
  if (seen.join(' ') !== before.filter((id) => named.has(id)).join(' ')) throw stale(edit, 'the order of its images was changed by an edit applied since');
  let next = 0;
  return current.map((id) => (named.has(id) ? (after[next++] as number) : id));
}

/**
 * Approves a pending edit and applies it. CONFLICT when it is no longer pending, or when what
 * it changes changed since (another order, another comment, an image gone).
 */
export async function approveEdit(deps: CoverArtDeps, id: number | string, approver: Approver, note?: string): Promise<Edit> {
  const edit = await requireEdit(deps.db, id);
  mayClose(edit, approver, 'approve');
  const now = deps.clock.now();
  const outcome = await deps.db.transaction().execute(async (trx): Promise<{ release?: ReleaseRef; removed?: { id: number; suffix: string } }> => {
    if (edit.kind === 'set-cover') {
      const group = edit.release_group === null ? undefined : await findReleaseGroup(trx, edit.release_group);
      const release = await releaseOf(trx, edit);
      if (group === undefined || release.release_group !== group.id) throw stale(edit, `release ${edit.release} is no longer in release group ${edit.release_group}`);
      await applyGroupCover(trx, group.id, release.id);
      await closeEdit(trx, edit.id, 'approved', approver, now, note);
      return {};
    }
    const release = await releaseOf(trx, edit);
    await markChanged(trx, release.id, now);
    await closeEdit(trx, edit.id, 'approved', approver, now, note);
    if (edit.kind === 'reorder') {
      await setOrdering(trx, reorderedNow(edit, await currentOrder(trx, release.id)));
      return { release };
    }
    const image = await imageOf(trx, edit, release);
    if (edit.kind === 'add') {
      await applyImageFields(trx, image.id, { approved: true });
    } else if (edit.kind === 'edit') {
      const after = edit.after as ImageFields;
      const before = edit.before as ImageFields;
      const current = await imageFields(trx, image.id);
      for (const key of Object.keys(after) as (keyof ImageFields)[]) {
        if (JSON.stringify(current[key]) !== JSON.stringify(before[key])) throw stale(edit, `the image's ${key} changed since it was made`);
      }
      await applyImageFields(trx, image.id, after);
    } else {
      await deleteImage(trx, release.id, image.id);
      return { release, removed: image };
    }
    return { release };
  });
  await afterClosing(deps, outcome);
  return requireEdit(deps.db, edit.id);
}

/** Rejects a pending edit: nothing of it is applied, and a pending addition is removed with its files. */
export async function rejectEdit(deps: CoverArtDeps, id: number | string, approver: Approver, note?: string): Promise<Edit> {
  const edit = await requireEdit(deps.db, id);
  mayClose(edit, approver, 'reject');
  const now = deps.clock.now();
  const outcome = await deps.db.transaction().execute(async (trx): Promise<{ release?: ReleaseRef; removed?: { id: number; suffix: string } }> => {
    const release = edit.release === null ? undefined : await findRelease(trx, edit.release);
    if (release === undefined || edit.kind === 'set-cover') {
      await closeEdit(trx, edit.id, 'rejected', approver, now, note);
      return {};
    }
    if (edit.kind !== 'add') {
      await bumpRevision(trx, release.id);
      await closeEdit(trx, edit.id, 'rejected', approver, now, note);
      return {};
    }
    await markChanged(trx, release.id, now);
    await closeEdit(trx, edit.id, 'rejected', approver, now, note);
    const image = await findImage(trx, release.id, Number(edit.image));
    if (image === undefined) return { release };
    await deleteImage(trx, release.id, image.id);
    return { release, removed: image };
  });
  await afterClosing(deps, outcome);
  return requireEdit(deps.db, edit.id);
}

async function afterClosing(deps: CoverArtDeps, outcome: { release?: ReleaseRef; removed?: { id: number; suffix: string } }): Promise<void> {
  if (outcome.release === undefined) return;
  if (outcome.removed !== undefined) await afterRemoval(deps, outcome.release, outcome.removed);
  else await rewriteIndex(deps, outcome.release);
}

/** A release's art as editors see it: the listing as the API serves it, the revision to base changes on, and the edits waiting. */
export interface ReleaseArt {
  release: string;
  release_group: string;
  /** Give it back as expectRevision: a change based on another revision is refused (CONFLICT). */
  revision: number;
  listing: Listing;
  /** Pending edits of the release, oldest first (at most 1000). */
  pending: Edit[];
}

/** The listing plus pending changes of a release (or undefined: no such release). */
export async function releaseArt(deps: Pick<ApiDeps, 'db' | 'urls' | 'approval'>, releaseText: string): Promise<ReleaseArt | undefined> {
  const mbid = parseMbid(releaseText);
  if (mbid === undefined) throw invalidInput(`release ${JSON.stringify(releaseText)} is not a valid MBID`);
  const release = await findRelease(deps.db, mbid);
  if (release === undefined) return undefined;
  const row = await deps.db
    .selectFrom('release as r')
    .innerJoin('release_group as g', 'g.id', 'r.release_group')
    .select(['r.revision', 'g.gid'])
    .where('r.id', '=', release.id)
    .executeTakeFirstOrThrow();
  const listing = buildListing(deps.urls, release.gid, await listImages(deps.db, release.id), coversNeedApproval(deps.approval));
  const { edits } = await listEdits(deps.db, { release: release.gid, status: 'pending', limit: 1000 });
  return { release: release.gid, release_group: row.gid, revision: Number(row.revision), listing, pending: edits.reverse() };
}
