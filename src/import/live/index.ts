export { LiveCatalogue, type LiveCatalogueOptions, type MirrorStatus } from './follow.js';
export { isMirrorAway } from './source.js';
