/*
 * `sleeve import musicbrainz DIR`: signals, progress on stderr, the summary on stdout.
 * Loaded only when the command runs.
 */
import { readCatalogueMark } from '../cluster/mark.js';
import type { Config } from '../config/load.js';
import { openDatabase } from '../db/connect.js';
import { ImportInterrupted, importMusicBrainz, openPgBackend, openSqliteBackend, plainReporter, ttyReporter, type ImportSummary } from '../import/index.js';
import { invalidInput } from '../shared/errors.js';
import { systemClock } from '../shared/clock.js';
import { afterChange, openExisting, type CommandContext } from './command.js';
import { CommandInterrupted } from './errors.js';

const SIGNAL_EXIT: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };

function n(x: number): string {
  return x.toLocaleString('en-US');
}

function describe(s: ImportSummary): string {
  const a = s.applied;
  const entity = (label: string, c: { added: number; changed: number; removed: number; keptLocal?: number; moved?: number }) =>
    `  ${label}: ${n(c.added)} added, ${n(c.changed)} changed, ${n(c.removed)} removed${c.keptLocal ? `, ${n(c.keptLocal)} kept as local (images uploaded here)` : ''}${c.moved ? `, ${n(c.moved)} local rows moved` : ''}`;
  const lines = [
    `imported the MusicBrainz dump ${s.dump.timestamp === null ? '' : `of ${s.dump.timestamp} `}from ${s.dir}${s.resumed ? ' (resumed)' : ''}`,
    `  ${n(s.rows_read)} rows read in ${s.seconds.toFixed(1)} s (${n(s.rows_per_second)} rows/s)`,
    entity('releases', a.release),
    entity('release groups', a.release_group),
    entity('images', a.cover_art),
    entity('merged release MBIDs', a.release_gid_redirect),
    entity('merged release group MBIDs', a.release_group_gid_redirect),
    entity('release group covers', a.release_group_cover_art),
    ...(a.event === undefined
      ? ['  events: the dump has no event art archive tables (mbdump-event-art-archive.tar.bz2); events left as they were']
      : [entity('events', a.event), entity('event images', a.event_art ?? { added: 0, changed: 0, removed: 0 }), entity('merged event MBIDs', a.event_gid_redirect ?? { added: 0, changed: 0, removed: 0 })]),
    `  approved: ${a.approvedFrom === 'edit' ? 'from the edit table (the add-edit is closed)' : 'no mbdump/edit, so from edits_pending (no edit pending on the image)'}`,
  ];
  if (s.rows_skipped > 0) {
    lines.push(`  ${n(s.rows_skipped)} malformed rows skipped (--skip-malformed), first:`);
    for (const r of s.skipped_rows) lines.push(`    ${r.file} line ${r.line}: ${r.reason}\n      row: ${r.row}`);
  }
  const omitted = Object.entries(a.omitted);
  if (omitted.length > 0) {
    lines.push('  rows of the dump left out:');
    for (const [what, o] of omitted) lines.push(`    ${what}: ${n(o.count)}${o.examples.length > 0 ? ` (e.g. ${o.examples.join('; ')})` : ''}`);
  }
  lines.push('index.json files are not written by an import: sleeve serve writes each from the database when it is first asked for; images come from SLEEVE_UPSTREAM_URL (pull-through) or SLEEVE_IMAGE_BASE_URL.');
  return lines.join('\n');
}

/** Publishes the import to the serving processes and waits for them to show it (commands.ts `afterChange`). */
async function publishImport(ctx: CommandContext, config: Readonly<Config>, before: number): Promise<void> {
  const handle = await openDatabase(config.database);
  try {
    await afterChange(config, handle.db, before, false, (message) => ctx.io.stderr.write(`sleeve: warning: ${message}\n`));
  } finally {
    await handle.close();
  }
}

export async function runImportCommand(ctx: CommandContext, dir: string): Promise<number> {
  const batchText = ctx.options['batch-rows'];
  const batchRows = typeof batchText === 'string' ? Number(batchText) : 50_000;
  if (!Number.isSafeInteger(batchRows) || batchRows < 1 || batchRows > 10_000_000) throw invalidInput('--batch-rows must be a whole number from 1 to 10000000');
  const config = ctx.config();

  // The database must exist (pending migrations of a newer sleeve are applied): an import never makes one.
  const rt = await openExisting(ctx);
  let before: number;
  try {
    before = await readCatalogueMark(rt.database.db);
  } finally {
    await rt.close();
  }
  const backend = config.database.kind === 'postgres' ? await openPgBackend(config.database.url) : await openSqliteBackend(config.database.file);

  const controller = new AbortController();
  let caught: string | undefined;
  const onSignal = (signal: string) => {
    if (caught !== undefined) {
      process.stderr.write(`\nsleeve: ${signal} again: stopping now; nothing was applied\n`);
      process.exit(SIGNAL_EXIT[signal] ?? 1);
    }
    caught = signal;
    process.stderr.write(`\nsleeve: ${signal}: stopping at the next chunk boundary (${signal} again stops at once; either way nothing is applied half-way)\n`);
    controller.abort();
  };
  const onInt = () => onSignal('SIGINT');
  const onTerm = () => onSignal('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);

  const reporter = ctx.io.stderr.isTTY === true ? ttyReporter(ctx.io.stderr) : plainReporter(ctx.io.stderr);
  try {
    const summary = await importMusicBrainz(
      {
        backend,
        clock: systemClock,
        reporter,
        signal: controller.signal,
        // --trace-sql: each statement of the apply step and its duration on stderr, for tuning.
        ...(ctx.options['trace-sql'] === true ? { trace: (sql: string, ms: number) => ctx.io.stderr.write(`[${ms.toFixed(0).padStart(7)} ms] ${sql.replace(/\s+/g, ' ').slice(0, 160)}\n`) } : {}),
      },
      { dir, skipMalformed: ctx.options['skip-malformed'] === true, restart: ctx.options.restart === true, batchRows },
    );
    reporter.end();
    await publishImport(ctx, config, before);
    ctx.out(describe(summary), summary);
    return 0;
  } catch (err) {
    reporter.end();
    if (err instanceof ImportInterrupted) {
      const message = `${err.message}. Nothing was changed in sleeve's catalogue; what was staged is kept. Run the same command again to resume.`;
      throw new CommandInterrupted(message, SIGNAL_EXIT[caught ?? ''] ?? 130);
    }
    throw err;
  } finally {
    process.off('SIGINT', onInt);
    process.off('SIGTERM', onTerm);
    await backend.close();
  }
}
