/** The cover art module's public surface. */
export { answerKey, handleApiRequest, pathSegments, parseFilename, type ApiRequest, type ThumbnailOptions } from './api.js';
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
} from './catalogue.js';
export { approveEdit, rejectEdit, releaseArt, type ReleaseArt } from './approval.js';
export {
  findEdit,
  listEdits,
  FIRST_EDIT_ID,
  MAX_EDIT_PAGE,
  EDIT_NOTE_MAX_LENGTH,
  type ChangeOptions,
  type Edit,
  type EditKind,
  type Editor,
  type EditQuery,
  type EditStatus,
} from './edits.js';
export type { ApiDeps, CoverArtDeps, CoverArtRouteDeps } from './deps.js';
export { loadDemo, DEMO } from './demo.js';
export { finishPendingIndexes, reindex, writeIndex } from './indexer.js';
export { idForTime, timeOfId } from './ids.js';
export { THUMBNAIL_SIZES, indexKey, imageKey, type ThumbnailSize } from './keys.js';
export { buildListing, serializeListing, type Listing, type ListingImage, type ListingUrls } from './listing.js';
export { publishUrls, readPublishedUrls, type PublishedUrls } from './public-urls.js';
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
} from './repo.js';
export { ResponseCache, type ResponseCacheLimits } from './response-cache.js';
export { acceptsJson, errorPage, etagMatches, notModified, type ApiResponse } from './responses.js';
export { coverArtRoutes, sendApiResponse } from './routes.js';
export { FileCache, catalogueKeeps, catalogueKeepsNow } from './file-cache.js';
export { FileServer } from './file-server.js';
export { storeMisses, type StoreMisses } from './fill.js';
export { Upstream, type Fetched, type KnownFile } from './upstream.js';
export { artTypeNames, currentGroupListing, currentReleaseListing } from './current.js';
