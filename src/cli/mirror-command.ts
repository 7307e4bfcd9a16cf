/*
 * `sleeve mirror images [RELEASE_MBID…] [--all]`: fetches the files of imported releases that
 * the store lacks from SLEEVE_UPSTREAM_URL (cover-art/upstream/mirror.ts; docs/mirroring.md,
 * "Bulk mirror"). Progress on stderr, the summary on stdout. Exit 0 when every file is in the
 * store, 1 when any failed (listed in the summary), 130/143 when a signal stopped it.
 */
import { ConfigError } from '../config/load.js';
import type { MirrorProgress, MirrorSummary } from '../cover-art/upstream/mirror.js';
import { systemClock } from '../shared/clock.js';
import { invalidInput } from '../shared/errors.js';
import { readCatalogueMark } from '../cluster/mark.js';
import { parseMbid } from '../shared/uuid.js';
import { afterChange, openExisting, type Command, type CommandContext } from './command.js';
import { CommandInterrupted } from './errors.js';
import type { CliOut } from './io.js';

const SIGNAL_EXIT: Record<string, number> = { SIGINT: 130, SIGTERM: 143 };
/** A plain progress line this often when stderr is not a terminal, ms. */
const PLAIN_EVERY_MS = 30_000;
/** The terminal's progress line is redrawn at most this often, ms. */
const TTY_EVERY_MS = 200;

/** A whole number with thousands separated by commas, as toLocaleString('en-US') writes it, without loading ICU's locale data (about 30 ms of the start). */
function n(x: number): string {
  return String(x).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

function megabytes(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

function duration(s: number): string {
  if (!Number.isFinite(s)) return '?';
  const m = Math.floor(s / 60);
  return m > 0 ? `${m}m${String(Math.round(s % 60)).padStart(2, '0')}s` : `${Math.round(s)}s`;
}

/** One line of progress: files done (of total), bytes, files per second and, with a total, time left. */
function progressLine(p: MirrorProgress): string {
  const seconds = Math.max(p.elapsedMs, 1) / 1000;
  const rate = p.done / seconds;
  const files = p.total === undefined ? `${n(p.done)} files` : `${n(p.done)}/${n(p.total)} files`;
  const left = p.total === undefined || rate === 0 ? '' : `, ${duration((p.total - p.done) / rate)} left`;
  return `mirror: ${files} (${n(p.fetched)} fetched, ${n(p.failed)} failed), ${megabytes(p.bytes)}, ${rate.toFixed(1)} files/s${left}`;
}

/** Progress on stderr: a line redrawn in place on a terminal, a plain line now and then otherwise. */
function progressReporter(stream: CliOut): { update(p: MirrorProgress): void; end(): void } {
  const tty = stream.isTTY === true;
  const every = tty ? TTY_EVERY_MS : PLAIN_EVERY_MS;
  let lastAt = 0;
  let drawn = false;
  return {
    update(p) {
      if (p.elapsedMs - lastAt < every) return;
      lastAt = p.elapsedMs;
      if (tty) {
        stream.write(`\r${progressLine(p).slice(0, Math.max(20, (stream.columns ?? 100) - 1))}\x1b[K`);
        drawn = true;
      } else stream.write(`${progressLine(p)}\n`);
    },
    end() {
      if (drawn) stream.write('\n');
      drawn = false;
    },
  };
}

function describe(s: MirrorSummary): string {
  const reasons = Object.entries(s.failed)
    .filter(([, count]) => count > 0)
    .map(([reason, count]) => `${n(count)} ${reason}`);
  const lines = [
    `mirrored ${n(s.releases)} releases${s.events === undefined ? '' : ` and ${n(s.events)} events`} (${n(s.files)} files) in ${s.seconds.toFixed(1)} s: ${n(s.fetched)} fetched (${megabytes(s.bytes)}), ${n(s.skipped)} already in the store, ${n(s.failed_total)} failed${reasons.length > 0 ? ` (${reasons.join(', ')})` : ''}`,
  ];
  if (s.unverified > 0) lines.push(`  ${n(s.unverified)} fetched files had no md5 in the upstream's _files.xml (checked by decoding only)`);
  for (const f of s.failures) lines.push(`  ${f.reason}: ${f.key}: ${f.message}`);
  if (s.failures.length < s.failed_total) lines.push(`  … and ${n(s.failed_total - s.failures.length)} more`);
  if (s.failed_total > 0) lines.push('Run the same command again to retry what failed (what is in the store is skipped).');
  return lines.join('\n');
}

function positiveNumber(ctx: CommandContext, name: string, fallback: number | undefined, max: number, whole: boolean): number | undefined {
  const text = ctx.options[name];
  if (typeof text !== 'string') return fallback;
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value <= 0 || value > max || (whole && !Number.isInteger(value))) {
    throw invalidInput(`--${name} must be a ${whole ? 'whole ' : ''}number above 0, at most ${max}`);
  }
  return value;
}

async function run(ctx: CommandContext): Promise<number> {
  const all = ctx.options.all === true;
  if (all === (ctx.args.length > 0)) throw invalidInput('usage: sleeve mirror images RELEASE_MBID... | --all (name releases or give --all, not both)');
  // Loaded here: the other commands do not pay for sharp and the mirror at start-up.
  const { mirrorImages, MIRROR_SIZES, parseSizes } = await import('../cover-art/upstream/mirror.js');
  const { Upstream } = await import('../cover-art/upstream/upstream.js');
  const sizes = typeof ctx.options.sizes === 'string' ? parseSizes(ctx.options.sizes) : MIRROR_SIZES;
  const concurrency = positiveNumber(ctx, 'concurrency', 8, 256, true) as number;
  const rate = positiveNumber(ctx, 'rate', undefined, 100_000, false);
  const config = ctx.config();
  if (config.upstream === undefined) {
    throw new ConfigError(['SLEEVE_UPSTREAM_URL is not set: sleeve mirror images fetches from it (https://archive.org/download for the real archive)']);
  }

  const rt = await openExisting(ctx);
  const controller = new AbortController();
  let caught: string | undefined;
  const onSignal = (signal: string) => {
    if (caught !== undefined) {
      process.stderr.write(`\nsleeve: ${signal} again: stopping now\n`);
      process.exit(SIGNAL_EXIT[signal] ?? 1);
    }
    caught = signal;
    process.stderr.write(`\nsleeve: ${signal}: stopping; downloads in flight are abandoned and nothing of them is stored\n`);
    controller.abort();
  };
  const onInt = () => onSignal('SIGINT');
  const onTerm = () => onSignal('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  const reporter = progressReporter(ctx.io.stderr);
  try {
    const deps = rt.coverArt;
    // This run's own cap on requests in flight: --concurrency, not the serving processes' setting.
    const upstream = new Upstream({ db: deps.db, store: deps.store, clock: systemClock, config: { ...config.upstream, concurrency }, maxPixels: deps.limits.maxPixels });
    const summary = await mirrorImages(
      { db: deps.db, store: deps.store, clock: systemClock, upstream },
      { releases: all ? 'all' : ctx.args, sizes, concurrency, rate, signal: controller.signal, progress: (p) => reporter.update(p) },
    );
    reporter.end();
    // The listings then say what the fetched files are (docs/interface.md, "Image entry").
    const { measureUnmeasured, measureUnmeasuredEvents } = await import('../cover-art/images/measure.js');
    const named = all ? 'all' : ctx.args.map((a) => parseMbid(a) ?? a);
    const measured = await measureUnmeasured(deps, named);
    const events = summary.events === undefined ? { events: 0, failed: 0 } : await measureUnmeasuredEvents(deps, named);
    const failedMeasures = measured.failed + events.failed;
    if (failedMeasures > 0) ctx.io.stderr.write(`sleeve: warning: ${failedMeasures} mirrored image(s) could not be measured for the listings; see: sleeve art measure\n`);
    if (measured.releases + events.events > 0) await afterChange(config, deps.db, await readCatalogueMark(deps.db), true, (m) => ctx.io.stderr.write(`sleeve: warning: ${m}\n`));
    if (summary.interrupted) {
      const message = `stopped by ${caught ?? 'a signal'}: ${n(summary.fetched)} files fetched so far, each stored whole. Run the same command again to carry on.`;
      throw new CommandInterrupted(message, SIGNAL_EXIT[caught ?? ''] ?? 130);
    }
    ctx.out(describe(summary), summary);
    return summary.failed_total > 0 ? 1 : 0;
  } finally {
    reporter.end();
    process.off('SIGINT', onInt);
    process.off('SIGTERM', onTerm);
    await rt.close();
  }
}

const mirrorImagesCommand: Command = {
  name: 'mirror images',
  options: { all: { type: 'boolean' }, sizes: { type: 'string' }, concurrency: { type: 'string' }, rate: { type: 'string' } },
  run,
};

/** The mirror command by name, merged with the others' in main.ts. */
export const MIRROR_COMMANDS: Record<string, Command> = { [mirrorImagesCommand.name]: mirrorImagesCommand };
