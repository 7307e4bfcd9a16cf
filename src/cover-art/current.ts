import type { ApiDeps } from './deps.js';
import { buildListing, type Listing } from './listing.js';
import { chooseGroupRelease, coversNeedApproval, findRelease, findReleaseGroup, listImages, loadArtTypes } from './repo.js';

/**
 * A release's listing as its index.json says once written, read from the database (so a
 * change is seen at once, whatever the store): undefined for an unknown release. A release
 * without images has an empty listing.
 */
export async function currentReleaseListing(deps: Pick<ApiDeps, 'db' | 'urls' | 'approval'>, mbid: string): Promise<Listing | undefined> {
  const release = await findRelease(deps.db, mbid);
  if (release === undefined) return undefined;
  return buildListing(deps.urls, release.gid, await listImages(deps.db, release.id), coversNeedApproval(deps.approval));
}

/** The release group's listing as the read API answers it (its chosen release's), or undefined when it has none. */
export async function currentGroupListing(deps: Pick<ApiDeps, 'db' | 'urls' | 'approval'>, mbid: string): Promise<Listing | undefined> {
  const approvedOnly = coversNeedApproval(deps.approval);
  const group = await findReleaseGroup(deps.db, mbid);
  const chosen = group === undefined ? undefined : await chooseGroupRelease(deps.db, group.id, approvedOnly);
  if (chosen === undefined) return undefined;
  return buildListing(deps.urls, chosen.gid, await listImages(deps.db, chosen.id), approvedOnly);
}

/** The art types (id order), for pickers. */
export async function artTypeNames(deps: Pick<ApiDeps, 'db'>): Promise<string[]> {
  return (await loadArtTypes(deps.db)).map((t) => t.name);
}
