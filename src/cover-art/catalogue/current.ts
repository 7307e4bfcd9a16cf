import { loadKinds } from './art-changes.js';
import type { ApiDeps } from '../deps.js';
import type { ArtEntity, ArtListing } from './entity.js';
import { buildListing, type Listing } from '../listings/listing.js';
import { chooseGroupRelease, coversNeedApproval, findReleaseGroup, listImages } from './repo.js';

/**
 * A release's (or an event's) listing as its index.json says once written, read from the
 * database (so a change is seen at once, whatever the store): undefined for an unknown one.
 * One without images has an empty listing.
 */
export async function currentListing<L extends ArtListing>(deps: Pick<ApiDeps, 'db' | 'urls' | 'approval'>, entity: ArtEntity<L>, mbid: string): Promise<L | undefined> {
  const owner = await entity.find(deps.db, mbid);
  if (owner === undefined) return undefined;
  return entity.listing(deps.urls, owner.gid, await entity.listImages(deps.db, owner.id), coversNeedApproval(deps.approval));
}

/** The release group's listing as the read API answers it (its chosen release's), or undefined when it has none. */
export async function currentGroupListing(deps: Pick<ApiDeps, 'db' | 'urls' | 'approval'>, mbid: string): Promise<Listing | undefined> {
  const approvedOnly = coversNeedApproval(deps.approval);
  const group = await findReleaseGroup(deps.db, mbid);
  const chosen = group === undefined ? undefined : await chooseGroupRelease(deps.db, group.id, approvedOnly);
  if (chosen === undefined) return undefined;
  return buildListing(deps.urls, chosen.gid, await listImages(deps.db, chosen.id), approvedOnly);
}

/** The art types of a release's or an event's images (id order), for pickers. */
export async function artTypeNames(deps: Pick<ApiDeps, 'db'>, entity: ArtEntity): Promise<string[]> {
  return (await loadKinds(deps.db, entity)).map((t) => t.name);
}
