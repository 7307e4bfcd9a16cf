import { createHash } from 'node:crypto';
import { accountRoles } from '../auth/pages.js';
import { addArt, currentReleaseListing, editArt, findEdit, findRelease, rejectEdit, releaseRevision, removeArt, reorderArt, setGroupCover, type ChangeOptions, type Editor as CoverArtEditor, type Listing, type ListingImage } from '../cover-art/index.js';
import { AppError, isAppError } from '../shared/errors.js';
import { parseMbid } from '../shared/uuid.js';
import type { WebsiteDeps } from './deps.js';

/*
 * The changes the website makes (from its pages and its write API), in one place: each names
 * the editor who makes it, and runs the cover art module's own add, edit, remove and reorder
 * (the CLI's code path: its checks, id allocation, thumbnails, index.json). Changes to one
 * release take turns in this process, and a stale-listing check (If-Match) hands the release's
 * revision to the change it guards, so the two are one step across processes too.
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
export function listingTag(listing: Listing): string {
  const seen = listing.images.map((i) => [i.id, i.types, i.comment, i.approved]);
  return `"${createHash('sha256').update(JSON.stringify(seen)).digest('base64url').slice(0, 27)}"`;
}

/** Whether an If-Match header (RFC 9110 §13.1.1, strong comparison) lets a change of this listing go ahead. */
function ifMatchHolds(header: string | undefined, listing: Listing): boolean {
  if (header === undefined) return true;
  const trimmed = header.trim();
  if (trimmed === '*') return true;
  const tag = listingTag(listing);
  return trimmed.split(',').some((t) => t.trim() === tag);
}

const STALE = 'The listing changed since you read it (If-Match does not match its ETag); read it again and retry';

/** Changes to one release take turns (a bounded map: one entry per release being changed). */
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

function releaseKey(text: string): string {
  return parseMbid(text) ?? text;
}

/** The release's current listing, or NOT_FOUND. */
export async function releaseListing(deps: WebsiteDeps, release: string): Promise<Listing> {
  const mbid = parseMbid(release);
  if (mbid === undefined) throw new AppError('INVALID_INPUT', `release ${JSON.stringify(release)} is not a valid MBID (a UUID such as 76df3287-6cda-33eb-8e9a-044b5e15ffdd)`);
  const listing = await currentReleaseListing(deps.api, mbid);
  if (listing === undefined) throw new AppError('NOT_FOUND', `no release ${mbid}`);
  return listing;
}

/**
 * Runs a change of a release, in its turn, after checking the If-Match precondition against its
 * listing. With If-Match, the release's revision is read before the listing and given to the
 * change (`expectRevision`): a change another process commits between the check and this one
 * moves it, and this one is then refused inside its transaction (CONFLICT), as a stale If-Match is.
 */
async function guarded<T>(deps: WebsiteDeps, release: string, ifMatch: string | undefined, fn: (expectRevision: number | undefined) => Promise<T>): Promise<T> {
  const result = await inTurn(releaseKey(release), async () => {
    if (ifMatch === undefined) return fn(undefined);
    const mbid = parseMbid(release);
    const ref = mbid === undefined ? undefined : await findRelease(deps.api.db, mbid);
    const revision = ref === undefined ? undefined : await releaseRevision(deps.api.db, ref.id);
    if (!ifMatchHolds(ifMatch, await releaseListing(deps, release))) throw new AppError('CONFLICT', STALE);
    try {
      return await fn(revision);
    } catch (err) {
      if (isAppError(err) && err.code === 'CONFLICT' && revision !== undefined && (await releaseRevision(deps.api.db, (ref as { id: number }).id)) !== revision) {
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
  release: string;
  bytes: Buffer;
  types: string[];
  comment: string;
  /** The editor's note, stored with the edit. */
  editNote?: string | undefined;
}

export function addImage(deps: WebsiteDeps, editor: Editor, input: AddInput, ifMatch?: string): Promise<ListingImage> {
  return guarded(deps, input.release, ifMatch, async (expectRevision) =>
    addArt(deps.coverArt, { release: input.release, bytes: input.bytes, types: input.types, comment: input.comment }, await options(deps, editor, expectRevision, input.editNote)),
  );
}

/**
 * Takes back an addition of this same request (a later file of one upload form was refused),
 * as its editor: an addition waiting for an approver is withdrawn (its edit rejected by its own
 * editor, which removes the image and its files); one that applied is removed at once, since it
 * was never meant to stand on its own. Either way the edits say who did it.
 */
export function undoAdd(deps: WebsiteDeps, editor: Editor, release: string, entry: ListingImage): Promise<void> {
  return guarded(deps, release, undefined, async () => {
    const by = await asEditor(deps, editor);
    const edit = await findEdit(deps.coverArt.db, entry.edit);
    if (edit?.status === 'pending' && edit.kind === 'add' && edit.image === entry.id && edit.editor?.id === editor.id) {
      await rejectEdit(deps.coverArt, edit.id, by);
      return;
    }
    // It applied at once, so its removal by the same editor does too.
    await removeArt(deps.coverArt, release, entry.id, { editor: by });
  });
}

export function editImage(deps: WebsiteDeps, editor: Editor, input: { release: string; id: string; types?: string[]; comment?: string; editNote?: string }, ifMatch?: string): Promise<ListingImage> {
  return guarded(deps, input.release, ifMatch, async (expectRevision) =>
    editArt(deps.coverArt, { release: input.release, imageId: input.id, types: input.types, comment: input.comment }, await options(deps, editor, expectRevision, input.editNote)),
  );
}

export function removeImage(deps: WebsiteDeps, editor: Editor, release: string, id: string, ifMatch?: string, editNote?: string): Promise<void> {
  return guarded(deps, release, ifMatch, async (expectRevision) => {
    await removeArt(deps.coverArt, release, id, await options(deps, editor, expectRevision, editNote));
  });
}

export function reorderImages(deps: WebsiteDeps, editor: Editor, release: string, ids: string[], ifMatch?: string, editNote?: string): Promise<void> {
  return guarded(deps, release, ifMatch, async (expectRevision) => {
    await reorderArt(deps.coverArt, release, ids, await options(deps, editor, expectRevision, editNote));
  });
}

export async function chooseGroupCover(deps: WebsiteDeps, editor: Editor, group: string, release: string, editNote?: string): Promise<void> {
  await setGroupCover(deps.coverArt, group, release, await options(deps, editor, undefined, editNote));
  await deps.afterChange?.();
}
