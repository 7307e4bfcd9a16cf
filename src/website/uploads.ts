import os from 'node:os';
import path from 'node:path';
import type { WebsiteDeps } from './deps.js';
import { UploadFolder, UploadSlots, type StreamLimits } from './upload-body.js';

/** What an upload needs besides the domain: where bodies stream to, their limits, and the bounds on uploads at once. */
export interface Uploads {
  folder: UploadFolder;
  slots: UploadSlots;
  limits: StreamLimits;
}

/**
 * Uploads in progress at once in one process, bodies being read included; more are answered
 * 503 with Retry-After (docs/api.md, "The write API for tools").
 */
const UPLOADS_AT_ONCE = 16;
/** Uploads of one account in progress at once, from the write API and the upload page together; more are answered 429 with Retry-After. */
export const UPLOADS_PER_USER = 2;
/** Uploads decoded and stored at a time (each holds its file and its decoded pixels in memory). */
const UPLOADS_WORKING = 2;
/** What a refused upload is told to wait, in seconds (Retry-After). */
export const UPLOAD_RETRY_AFTER = '2';

/** The one set of upload slots of a website (the write API and the upload page share it). */
export function makeUploadSlots(): UploadSlots {
  return new UploadSlots({ max: UPLOADS_AT_ONCE, perUser: UPLOADS_PER_USER, working: UPLOADS_WORKING });
}

export function makeUploads(deps: WebsiteDeps, maxFiles: number): Uploads {
  return {
    folder: new UploadFolder(deps.uploadDir ?? path.join(os.tmpdir(), 'sleeve-uploads')),
    slots: deps.uploadSlots ?? makeUploadSlots(),
    limits: { maxFileBytes: deps.coverArt.limits.maxBytes, maxFiles, maxFields: 100, maxFieldBytes: 8192 },
  };
}
