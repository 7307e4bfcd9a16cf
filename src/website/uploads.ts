import os from 'node:os';
import path from 'node:path';
import type { WebsiteDeps } from './deps.js';
import { UploadFolder, UploadSlots, type StreamLimits } from './upload-body.js';

/** What an upload needs besides the domain: where bodies stream to, their limits, and a bound on uploads at once. */
export interface Uploads {
  folder: UploadFolder;
  slots: UploadSlots;
  limits: StreamLimits;
}

/** Uploads handled at once by one process; more are answered 503 with Retry-After (docs/api.md, "The write API for tools"). */
export const UPLOADS_AT_ONCE = 8;

export function makeUploads(deps: WebsiteDeps, maxFiles: number): Uploads {
  return {
    folder: new UploadFolder(deps.uploadDir ?? path.join(os.tmpdir(), 'sleeve-uploads')),
    slots: new UploadSlots(UPLOADS_AT_ONCE),
    limits: { maxFileBytes: deps.coverArt.limits.maxBytes, maxFiles, maxFields: 100, maxFieldBytes: 8192 },
  };
}
