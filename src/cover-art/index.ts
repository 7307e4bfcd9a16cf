/** The cover art module's public surface. */
export { answerKey, handleApiRequest, type ApiRequest } from './api/api.js';
export {
  addArt,
  addRelease,
  editArt,
  mergeRelease,
  parseDate,
  removeArt,
  reorderArt,
  setGroupCover,
  type AddArtInput,
  type EditArtInput,
  type ImageFields,
} from './catalogue/catalogue.js';
export { approveEdit, artState, rejectEdit, releaseArt, type ArtState, type ReleaseArt } from './catalogue/approval.js';
export { addImageTo, editImageOf, loadKinds, ownerRevision, removeImageOf, reorderImagesOf } from './catalogue/art-changes.js';
export { EVENT_ART, RELEASE_ART, type ArtEntity, type ArtListing, type EntityName, type EntityRef, type EntryOf } from './catalogue/entity.js';
export {
  findEdit,
  listEdits,
  FIRST_EDIT_ID,
  MAX_EDIT_PAGE,
  EDIT_NOTE_MAX_LENGTH,
  storedEditNote,
  type ChangeOptions,
  type Edit,
  type EditKind,
  type Editor,
  type EditQuery,
  type EditStatus,
} from './catalogue/edits.js';
export type { ApiDeps, CoverArtDeps, CoverArtRouteDeps, ThumbnailOptions } from './deps.js';
export { loadDemo, DEMO } from './catalogue/demo.js';
export { finishPendingIndexes, reindex, writeIndex } from './listings/indexer.js';
export { idForTime, timeOfId } from './ids.js';
export { THUMBNAIL_SIZES, indexKey, imageKey, type ThumbnailSize } from './files/keys.js';
export { buildListing, serializeListing, type EventListing, type EventListingImage, type Listing, type ListingImage, type ListingUrls } from './listings/listing.js';
export { publishUrls, readPublishedUrls, type PublishedUrls } from './listings/public-urls.js';
export {
  BACK_TYPE,
  chooseGroupRelease,
  coversNeedApproval,
  findRelease,
  findReleaseGroup,
  FRONT_TYPE,
  groupReleases,
  listImages,
  loadArtTypes,
  readCounter,
  recentImages,
  recountCatalogue,
  releaseDetails,
  releaseRevision,
  type GroupChoice,
  type GroupChoiceReason,
  type GroupRelease,
  type ImageWithTypes,
  type RecentImage,
  type ReleaseRef,
  type ReleaseDetails,
  type Queryable,
} from './catalogue/repo.js';
export { ResponseCache, type ResponseCacheLimits } from './api/response-cache.js';
export { acceptsJson, errorPage, etagMatches, notModified, type ApiResponse } from './api/responses.js';
export { coverArtRoutes, sendApiResponse } from './api/routes.js';
export { FileCache, catalogueKeeps, catalogueKeepsNow } from './files/file-cache.js';
export { FileServer } from './files/file-server.js';
export { storeMisses, type StoreMisses } from './files/fill.js';
export { Upstream, type Fetched, type KnownFile } from './upstream/upstream.js';
export { artTypeNames, currentGroupListing, currentListing } from './catalogue/current.js';
export { eventName, findEvent } from './catalogue/event-repo.js';
