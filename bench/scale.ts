/**
 * scale: front lookups on a catalogue of 1,000,000 releases against one of 1,000.
 *  (a) warm, one URL (the response cache answers);
 *  (b) uncached (SLEEVE_RESPONSE_CACHE=0), random MBIDs from a sample of the catalogue.
 * Goal: the large catalogue within 10 % of the small one (requests/s).
 */
import { readFileSync } from 'node:fs';
import type { Catalogue } from './lib/catalogue.js';
import { ensureCatalogue } from './lib/catalogue.js';
import type { Options } from './lib/options.js';
import type { Server } from './lib/proc.js';
import { describeRounds, interleavedRounds, mediansTable, runsTable, seriesSummary, type RoundSettings, type Series } from './lib/rounds.js';
import { expect307, LOAD_CORE, startSleeve } from './lib/servers.js';
import { fmtInt, fmtMs, fmtRatio, passFail, table } from './lib/stats.js';

const GOAL_WITHIN = 0.1;

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

function label(c: Catalogue): string {
  return `${c.releases.toLocaleString('en-US')} releases`;
}

function phase(name: string, cats: [Catalogue, Catalogue], env: Record<string, string>, random: boolean, settings: RoundSettings, cpuProf: boolean): Promise<Series[]> {
  log(`scale ${name}`);
  return interleavedRounds(
    cats.map((c) => ({
      label: label(c),
      start: () => startSleeve({ name: `sleeve-${c.releases}`, dataDir: c.dataDir, env, only: 'coverart', cpuProf }),
      check: async (server: Server) => {
        const paths = random ? readFileSync(c.pathsFile, 'utf8').split('\n').filter((l) => l !== '').slice(0, 5) : [`/release/${c.oneMbid}/front`];
        for (const p of paths) await expect307(server, p);
      },
      path: random ? '/' : `/release/${c.oneMbid}/front`,
      pathsFile: random ? c.pathsFile : undefined,
    })),
    settings,
  );
}

export async function scaleBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const settings: RoundSettings = {
    durationS: opts.duration ?? 6,
    rounds: opts.rounds ?? 5,
    warmupS: opts.warmup,
    connections: opts.connections,
    loadCore: LOAD_CORE,
    freshProcess: !opts.sameProcess,
  };
  const small = await ensureCatalogue(opts.small, opts.sample, opts.rebuild);
  const large = await ensureCatalogue(opts.large, opts.sample, opts.rebuild);
  const cats: [Catalogue, Catalogue] = [small, large];

  const cached = await phase('(a) cached, one URL', cats, {}, false, settings, opts.cpuProf);
  const uncached = await phase('(b) uncached, random MBIDs', cats, { SLEEVE_RESPONSE_CACHE: '0' }, true, settings, opts.cpuProf);

  const judge = (series: Series[]) => {
    const [s, l] = series.map(seriesSummary) as [ReturnType<typeof seriesSummary>, ReturnType<typeof seriesSummary>];
    const ratio = l.rps.median / s.rps.median;
    return { small: s, large: l, ratio, p99Ratio: l.p99.median / s.p99.median, ok: Math.abs(ratio - 1) <= GOAL_WITHIN };
  };
  const a = judge(cached);
  const b = judge(uncached);
  const how = describeRounds(settings, cached[0]?.runs[0]?.tool);
  const markdown = [
    `### scale: front lookups, ${label(large)} vs ${label(small)}`,
    '',
    table(
      ['catalogue', '>database file', '>build', '>sampled MBIDs'],
      cats.map((c) => [
        label(c),
        `${(c.dbBytes / 2 ** 20).toFixed(1)} MiB`,
        `${c.buildSeconds.toFixed(1)} s${c.reused ? ' (cached in bench/.work/)' : ''}`,
        fmtInt(readFileSync(c.pathsFile, 'utf8').split('\n').filter((l) => l !== '').length),
      ]),
    ),
    '',
    `(a) warm, one URL per catalogue (answered from the response cache). ${how}.`,
    '',
    runsTable(cached),
    '',
    mediansTable(cached),
    '',
    `(b) uncached: SLEEVE_RESPONSE_CACHE=0, each request a random MBID from the sample (${uncached[0]?.runs[0]?.tool === 'wrk' ? 'wrk Lua script' : 'autocannon setupRequest'}). ${how}.`,
    '',
    runsTable(uncached),
    '',
    mediansTable(uncached),
    '',
    `- (a) cached: ${label(large)} / ${label(small)} requests/s **${fmtRatio(a.ratio)}** (goal within ±${GOAL_WITHIN * 100} %): **${passFail(a.ok)}**; p99 ${fmtMs(a.small.p99.median)} → ${fmtMs(a.large.p99.median)}`,
    `- (b) uncached: ${label(large)} / ${label(small)} requests/s **${fmtRatio(b.ratio)}** (goal within ±${GOAL_WITHIN * 100} %): **${passFail(b.ok)}**; p99 ${fmtMs(b.small.p99.median)} → ${fmtMs(b.large.p99.median)}`,
  ].join('\n');
  return {
    markdown,
    data: { settings, catalogues: cats, cached: a, uncached: b },
    goalsMet: a.ok && b.ok,
  };
}
