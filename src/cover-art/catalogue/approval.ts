/*
 * Closing pending edits (docs/decisions.md, "Cover art edits and approval"). Under the
 * `review` policy an ordinary editor's change waits for an approver: an addition is stored
 * at once with `approved: false`; an edit of types or comment, a removal, a reorder and a
 * group's cover choice wait unapplied. Approving applies what waits if what it changes is
 * still as the edit saw it (the image's fields it edits, the image it removes, the images a
 * reorder names and their order among themselves); else CONFLICT, and the edit can only be
 * rejected. Rejecting drops it, and a rejected addition goes with its files, as removeArt
 * removes an image. A release's edits and an event's are closed alike (entity.ts).
 */
import { AppError, invalidInput } from '../../shared/errors.js';
import { afterRemoval, applyImageFields, bumpRevision, currentOrder, deleteImage, imageFields, markChanged, ownerRevision, rewriteIndex, setOrdering, type ImageFields } from './art-changes.js';
import { applyGroupCover } from './catalogue.js';
import type { ApiDeps, CoverArtDeps } from '../deps.js';
import { closeEdit, listEdits, requireEdit, type Edit, type Editor } from './edits.js';
import { EVENT_ART, RELEASE_ART, type ArtEntity, type ArtListing, type EntityRef } from './entity.js';
import type { Listing } from '../listings/listing.js';
import { coversNeedApproval, findRelease, findReleaseGroup, type Queryable } from './repo.js';
import { parseMbid } from '../../shared/uuid.js';

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

/** Whose art the edit changes: an event's, or a release's. */
function entityOf(edit: Edit): { entity: ArtEntity; gid: string | null } {
  return edit.event !== null ? { entity: EVENT_ART, gid: edit.event } : { entity: RELEASE_ART, gid: edit.release };
}

/** The release or event the edit changes, as it is now (merged: the one it went into), if it is still there. */
async function findOwner(trx: Queryable, edit: Edit): Promise<EntityRef | undefined> {
  const { entity, gid } = entityOf(edit);
  return gid === null ? undefined : entity.find(trx, gid);
}

async function ownerOf(trx: Queryable, edit: Edit): Promise<EntityRef> {
  const owner = await findOwner(trx, edit);
  if (owner === undefined) throw stale(edit, `${entityOf(edit).entity.name} ${entityOf(edit).gid} is gone`);
  return owner;
}

async function imageOf(trx: Queryable, edit: Edit, owner: EntityRef): Promise<{ id: number; suffix: string }> {
  const image = await entityOf(edit).entity.findImage(trx, owner.id, Number(edit.image));
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
  const { entity } = entityOf(edit);
  const outcome = await deps.db.transaction().execute(async (trx): Promise<Outcome> => {
    if (edit.kind === 'set-cover') {
      const group = edit.release_group === null ? undefined : await findReleaseGroup(trx, edit.release_group);
      const release = edit.release === null ? undefined : await findRelease(trx, edit.release);
      if (release === undefined) throw stale(edit, `release ${edit.release} is gone`);
      if (group === undefined || release.release_group !== group.id) throw stale(edit, `release ${edit.release} is no longer in release group ${edit.release_group}`);
      await applyGroupCover(trx, group.id, release.id);
      await closeEdit(trx, edit.id, 'approved', approver, now, note);
      return {};
    }
    const owner = await ownerOf(trx, edit);
    await markChanged(trx, entity, owner.id, now);
    await closeEdit(trx, edit.id, 'approved', approver, now, note);
    if (edit.kind === 'reorder') {
      await setOrdering(trx, entity, reorderedNow(edit, await currentOrder(trx, entity, owner.id)));
      return { owner };
    }
    const image = await imageOf(trx, edit, owner);
    if (edit.kind === 'add') {
      await applyImageFields(trx, entity, image.id, { approved: true });
    } else if (edit.kind === 'edit') {
      const after = edit.after as ImageFields;
      const before = edit.before as ImageFields;
      const current = await imageFields(trx, entity, image.id);
      for (const key of Object.keys(after) as (keyof ImageFields)[]) {
        if (JSON.stringify(current[key]) !== JSON.stringify(before[key])) throw stale(edit, `the image's ${key} changed since it was made`);
      }
      await applyImageFields(trx, entity, image.id, after);
    } else {
      await deleteImage(trx, entity, owner.id, image.id);
      return { owner, removed: image };
    }
    return { owner };
  });
  await afterClosing(deps, entity, outcome);
  return requireEdit(deps.db, edit.id);
}

/** What closing an edit leaves to do after its commit: the owner's listing, and a removed image's files. */
interface Outcome {
  owner?: EntityRef;
  removed?: { id: number; suffix: string };
}

/** Rejects a pending edit: nothing of it is applied, and a pending addition is removed with its files. */
export async function rejectEdit(deps: CoverArtDeps, id: number | string, approver: Approver, note?: string): Promise<Edit> {
  const edit = await requireEdit(deps.db, id);
  mayClose(edit, approver, 'reject');
  const now = deps.clock.now();
  const { entity } = entityOf(edit);
  const outcome = await deps.db.transaction().execute(async (trx): Promise<Outcome> => {
    const owner = await findOwner(trx, edit);
    if (owner === undefined || edit.kind === 'set-cover') {
      await closeEdit(trx, edit.id, 'rejected', approver, now, note);
      return {};
    }
    if (edit.kind !== 'add') {
      await bumpRevision(trx, entity, owner.id);
      await closeEdit(trx, edit.id, 'rejected', approver, now, note);
      return {};
    }
    await markChanged(trx, entity, owner.id, now);
    await closeEdit(trx, edit.id, 'rejected', approver, now, note);
    const image = await entity.findImage(trx, owner.id, Number(edit.image));
    if (image === undefined) return { owner };
    await deleteImage(trx, entity, owner.id, image.id);
    return { owner, removed: image };
  });
  await afterClosing(deps, entity, outcome);
  return requireEdit(deps.db, edit.id);
}

async function afterClosing(deps: CoverArtDeps, entity: ArtEntity, outcome: Outcome): Promise<void> {
  if (outcome.owner === undefined) return;
  if (outcome.removed !== undefined) await afterRemoval(deps, entity, outcome.owner, outcome.removed);
  else await rewriteIndex(deps, entity, outcome.owner);
}

/** A release's or an event's art as editors see it: the listing as the API serves it, the revision to base changes on, and the edits waiting. */
export interface ArtState<L extends ArtListing = ArtListing> {
  /** The MBID (the one a merged MBID went into). */
  gid: string;
  /** Give it back as expectRevision: a change based on another revision is refused (CONFLICT). */
  revision: number;
  listing: L;
  /** Pending edits, oldest first (at most 1000). */
  pending: Edit[];
}

/** The listing, revision and pending changes of a release or an event (undefined: no such one). */
export async function artState<L extends ArtListing>(deps: Pick<ApiDeps, 'db' | 'urls' | 'approval'>, entity: ArtEntity<L>, text: string): Promise<ArtState<L> | undefined> {
  const mbid = parseMbid(text);
  if (mbid === undefined) throw invalidInput(`${entity.name} ${JSON.stringify(text)} is not a valid MBID`);
  const owner = await entity.find(deps.db, mbid);
  if (owner === undefined) return undefined;
  const listing = entity.listing(deps.urls, owner.gid, await entity.listImages(deps.db, owner.id), coversNeedApproval(deps.approval));
  const { edits } = await listEdits(deps.db, { [entity.name]: owner.gid, status: 'pending', limit: 1000 });
  return { gid: owner.gid, revision: await ownerRevision(deps.db, entity, owner.id), listing, pending: edits.reverse() };
}

/** A release's art as editors see it (artState), with its group. */
export interface ReleaseArt {
  release: string;
  release_group: string;
  revision: number;
  listing: Listing;
  pending: Edit[];
}

/** The listing plus pending changes of a release (or undefined: no such release). */
export async function releaseArt(deps: Pick<ApiDeps, 'db' | 'urls' | 'approval'>, releaseText: string): Promise<ReleaseArt | undefined> {
  const state = await artState(deps, RELEASE_ART, releaseText);
  if (state === undefined) return undefined;
  const row = await deps.db
    .selectFrom('release as r')
    .innerJoin('release_group as g', 'g.id', 'r.release_group')
    .select('g.gid')
    .where('r.gid', '=', state.gid)
    .executeTakeFirstOrThrow();
  return { release: state.gid, release_group: row.gid, revision: state.revision, listing: state.listing, pending: state.pending };
}
