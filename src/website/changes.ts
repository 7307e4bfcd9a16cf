import { createHash } from 'node:crypto';
import { accountRoles } from '../auth/pages.js';
import {
  addImageTo,
  currentListing,
  editImageOf,
  findEdit,
  ownerRevision,
  rejectEdit,
  removeImageOf,
  reorderImagesOf,
  setGroupCover,
  type ArtListing,
  type ChangeOptions,
  type Editor as CoverArtEditor,
  type EventListingImage,
} from '../cover-art/index.js';
import { AppError, isAppError } from '../shared/errors.js';
import { parseMbid } from '../shared/uuid.js';
import type { WebsiteDeps } from './deps.js';
import type { SiteEntity } from './entities.js';

/*
 * The changes the website makes (from its pages and its write API), in one place: each names
 * the editor who makes it, and runs the cover art module's own add, edit, remove and reorder
 * (the CLI's code path: its checks, id allocation, thumbnails, index.json) on a release's or an
 * event's art (entities.ts). Changes to one release or event take turns in this process, and a
 * stale-listing check (If-Match) hands its revision to the change it guards, so the two are one
 * step across processes too.
 */

/** Who makes a change: the signed-in account, or the account an access token speaks for. */
export interface Editor {
  id: number;
  name: string;
}

/**
 * The editor as the cover art module takes it: the account with whether it holds the approver
 * role, read at the change (a role given or taken applies to the next change). Under
 * SLEEVE_APPROVAL=review an ordinary editor's change waits for an approver.
 */
export async function asEditor(deps: WebsiteDeps, editor: Editor): Promise<CoverArtEditor> {
  const roles = await accountRoles(deps.pages.deps, editor.id);
  return { id: editor.id, name: editor.name, approver: roles.includes('approver') };
}

async function options(deps: WebsiteDeps, editor: Editor, expectRevision: number | undefined, editNote?: string): Promise<ChangeOptions> {
  return { editor: await asEditor(deps, editor), expectRevision, editNote };
}

/**
 * The listing's version, for If-Match: a hash of what an editor sees and acts on (the images
 * in order, with their types, comment and approval). It changes with every add, edit,
 * removal and reorder.
 */
export function listingTag(listing: ArtListing): string {
  const seen = listing.images.map((i) => [i.id, i.types, i.comment, i.approved]);
  return `"${createHash('sha256').update(JSON.stringify(seen)).digest('base64url').slice(0, 27)}"`;
}

/** Whether an If-Match header (RFC 9110 §13.1.1, strong comparison) lets a change of this listing go ahead. */
function ifMatchHolds(header: string | undefined, listing: ArtListing): boolean {
  if (header === undefined) return true;
  const trimmed = header.trim();
  if (trimmed === '*') return true;
  const tag = listingTag(listing);
  return trimmed.split(',').some((t) => t.trim() === tag);
}

const STALE = 'The listing changed since you read it (If-Match does not match its ETag); read it again and retry';

/** Changes to one release or event take turns (a bounded map: one entry per one being changed). */
const turns = new Map<string, Promise<unknown>>();

async function inTurn<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const before = turns.get(key) ?? Promise.resolve();
  const mine = before.catch(() => {}).then(fn);
  turns.set(key, mine);
  try {
    return await mine;
  } finally {
    if (turns.get(key) === mine) turns.delete(key);
  }
}

/** The current listing of a release or an event, or NOT_FOUND. */
export async function ownerListing(deps: WebsiteDeps, entity: SiteEntity, text: string): Promise<ArtListing> {
  const mbid = parseMbid(text);
  if (mbid === undefined) throw new AppError('INVALID_INPUT', `${entity.name} ${JSON.stringify(text)} is not a valid MBID (a UUID such as 76df3287-6cda-33eb-8e9a-044b5e15ffdd)`);
  const listing = await currentListing(deps.api, entity.art, mbid);
  if (listing === undefined) throw new AppError('NOT_FOUND', `no ${entity.name} ${mbid}`);
  return listing;
}

/**
 * Runs a change of a release or an event, in its turn, after checking the If-Match
 * precondition against its listing. With If-Match, its revision is read before the listing and
 * given to the change (`expectRevision`): a change another process commits between the check
 * and this one moves it, and this one is then refused inside its transaction (CONFLICT), as a
 * stale If-Match is.
 */
async function guarded<T>(deps: WebsiteDeps, entity: SiteEntity, owner: string, ifMatch: string | undefined, fn: (expectRevision: number | undefined) => Promise<T>): Promise<T> {
  const mbid = parseMbid(owner);
  const result = await inTurn(`${entity.name} ${mbid ?? owner}`, async () => {
    if (ifMatch === undefined) return fn(undefined);
    const ref = mbid === undefined ? undefined : await entity.art.find(deps.api.db, mbid);
    const revision = ref === undefined ? undefined : await ownerRevision(deps.api.db, entity.art, ref.id);
    if (!ifMatchHolds(ifMatch, await ownerListing(deps, entity, owner))) throw new AppError('CONFLICT', STALE);
    try {
      return await fn(revision);
    } catch (err) {
      if (isAppError(err) && err.code === 'CONFLICT' && ref !== undefined && (await ownerRevision(deps.api.db, entity.art, ref.id)) !== revision) {
        throw new AppError('CONFLICT', STALE);
      }
      throw err;
    }
  });
  await deps.afterChange?.();
  return result;
}

/** The longest comment an image takes, in UTF-16 code units as a form's maxlength counts (the website's forms and the API alike). */
export const COMMENT_MAX_LENGTH = 255;

export interface AddInput {
  /** The release's or event's MBID. */
  owner: string;
  bytes: Buffer;
  types: string[];
  comment: string;
  /** The editor's note, stored with the edit. */
  editNote?: string | undefined;
}

export function addImage(deps: WebsiteDeps, entity: SiteEntity, editor: Editor, input: AddInput, ifMatch?: string): Promise<EventListingImage> {
  return guarded(deps, entity, input.owner, ifMatch, async (expectRevision) =>
    addImageTo(deps.coverArt, entity.art, input.owner, { bytes: input.bytes, types: input.types, comment: input.comment }, await options(deps, editor, expectRevision, input.editNote)),
  );
}

/**
 * Takes back an addition of this same request (a later file of one upload form was refused),
 * as its editor: an addition waiting for an approver is withdrawn (its edit rejected by its own
 * editor, which removes the image and its files); one that applied is removed at once, since it
 * was never meant to stand on its own. Either way the edits say who did it.
 */
export function undoAdd(deps: WebsiteDeps, entity: SiteEntity, editor: Editor, owner: string, entry: EventListingImage): Promise<void> {
  return guarded(deps, entity, owner, undefined, async () => {
    const by = await asEditor(deps, editor);
    const edit = await findEdit(deps.coverArt.db, entry.edit);
    if (edit?.status === 'pending' && edit.kind === 'add' && edit.image === entry.id && edit.editor?.id === editor.id) {
      await rejectEdit(deps.coverArt, edit.id, by);
      return;
    }
    // It applied at once, so its removal by the same editor does too.
    await removeImageOf(deps.coverArt, entity.art, owner, entry.id, { editor: by });
  });
}

export function editImage(deps: WebsiteDeps, entity: SiteEntity, editor: Editor, input: { owner: string; id: string; types?: string[]; comment?: string; editNote?: string }, ifMatch?: string): Promise<EventListingImage> {
  return guarded(deps, entity, input.owner, ifMatch, async (expectRevision) =>
    editImageOf(deps.coverArt, entity.art, input.owner, { imageId: input.id, types: input.types, comment: input.comment }, await options(deps, editor, expectRevision, input.editNote)),
  );
}

export function removeImage(deps: WebsiteDeps, entity: SiteEntity, editor: Editor, owner: string, id: string, ifMatch?: string, editNote?: string): Promise<void> {
  return guarded(deps, entity, owner, ifMatch, async (expectRevision) => {
    await removeImageOf(deps.coverArt, entity.art, owner, id, await options(deps, editor, expectRevision, editNote));
  });
}

export function reorderImages(deps: WebsiteDeps, entity: SiteEntity, editor: Editor, owner: string, ids: string[], ifMatch?: string, editNote?: string): Promise<void> {
  return guarded(deps, entity, owner, ifMatch, async (expectRevision) => {
    await reorderImagesOf(deps.coverArt, entity.art, owner, ids, await options(deps, editor, expectRevision, editNote));
  });
}

export async function chooseGroupCover(deps: WebsiteDeps, editor: Editor, group: string, release: string, editNote?: string): Promise<void> {
  await setGroupCover(deps.coverArt, group, release, await options(deps, editor, undefined, editNote));
  await deps.afterChange?.();
}
