/*
 * Staging → sleeve's tables, in the one transaction the backend opens around it.
 *
 * What the dump says about the entities it holds wins; what sleeve's own commands
 * created ("local" rows, imported = 0) is kept (docs/decisions.md, "Import"):
 *  - rows of the dump are cleaned first (a key seen twice keeps one row; rows pointing
 *    at what the dump lacks are left out and counted) — apply-dump.ts;
 *  - local rows in the way are moved: a local release or group whose internal id the
 *    dump uses gets a new id, and one that has the MBID of a row of the dump takes
 *    that row's id and becomes imported — apply-catalogue.ts, as are the next two;
 *  - the dump's rows are written by id (MusicBrainz ids become sleeve's ids); rows
 *    imported before and gone from the dump are removed, unless images uploaded to
 *    sleeve hang on them: those stay, as local rows;
 *  - image ids are public and name files, so a dump image whose id a local image has
 *    is left out (and counted) rather than overwriting it.
 * The Event Art Archive's tables, when the dump has them, follow the same rules (apply-events.ts).
 * The SQL that differs between the databases is the backend's (ApplyDialect).
 */
import { updateCounters, writeCatalogue } from './apply-catalogue.js';
import { cleanDump } from './apply-dump.js';
import { cleanEvents, writeEvents } from './apply-events.js';
import { ApplyRun, type ApplyInput } from './apply-run.js';
import type { ApplyDialect, ApplyResult, SqlRunner } from './backend.js';

export type { ApplyInput } from './apply-run.js';

export async function applyStaging(db: SqlRunner, dialect: ApplyDialect, input: ApplyInput): Promise<ApplyResult> {
  const run = new ApplyRun(db, dialect, input);
  await dialect.begin(run.db);
  await cleanDump(run);
  if (input.withEvents) await cleanEvents(run);
  await writeCatalogue(run);
  if (input.withEvents) await writeEvents(run);
  await run.step('counters', () => updateCounters(run));
  await dialect.end(run.db);
  return run.result;
}
