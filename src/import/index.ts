/** The MusicBrainz import module's public surface. */
export { importDump, importMusicBrainz, ImportInterrupted, type ImportDeps, type ImportOptions, type ImportReporter, type ImportSummary, type FileSummary } from './musicbrainz.js';
export type { ApplyResult, EntityCounts, ImportBackend, Omission, SkippedRow } from './backend.js';
export { openPgBackend } from './pg-backend.js';
export { openSqliteBackend, stagingFile } from './sqlite-backend.js';
export { plainReporter, ttyReporter } from './progress.js';
export { DUMP_TABLES, type DumpTable } from './tables.js';
export { importLockHeld, type ImportLockPlace } from './lock.js';
