/**
 * sleeve's benchmarks (the issues' performance sections). `npm run bench` runs redirect,
 * ingest, scale, auth and cluster; `npm run bench -- NAME…` runs some (bench/lib/options.ts lists them);
 * `--help` lists the options.
 * Progress goes to stderr, the report (markdown) to stdout.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { authBench } from './auth.js';
import { clusterBench } from './cluster.js';
import { derivativesBench } from './derivatives.js';
import { filesBench } from './files.js';
import { frontDoorBench } from './front-door.js';
import { galleryBench } from './gallery.js';
import { ingestBench } from './ingest.js';
import { mirrorBench } from './mirror.js';
import { mirrorDbBench } from './mirror-db.js';
import { mirrorScaleBench } from './mirror-scale.js';
import { importBench } from './import.js';
import { describeMachine, machineInfo } from './lib/machine.js';
import { parseOptions, type BenchName, type Options } from './lib/options.js';
import { redirectBench } from './redirect.js';
import { scaleBench } from './scale.js';
import { soakBench } from './soak.js';
import { uploadBench } from './upload.js';

type Bench = (opts: Options) => Promise<{ markdown: string; data: unknown; goalsMet: boolean }>;
const BENCHES: Record<BenchName, Bench> = { redirect: redirectBench, ingest: ingestBench, scale: scaleBench, auth: authBench, cluster: clusterBench, import: importBench, files: filesBench, soak: soakBench, mirror: mirrorBench, gallery: galleryBench, upload: uploadBench, 'front-door': frontDoorBench, derivatives: derivativesBench, 'mirror-db': mirrorDbBench, 'mirror-scale': mirrorScaleBench };

async function main(): Promise<number> {
  let opts: Options | undefined;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`bench: ${(err as Error).message}\n`);
    return 2;
  }
  if (opts === undefined) return 0;

  const machine = await machineInfo();
  const started = Date.now();
  const command = `node ${process.argv.slice(1).map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : JSON.stringify(a))).join(' ')}`;
  process.stdout.write(`## sleeve benchmark\n\n\`\`\`\n${describeMachine(machine)}\ncommand:         ${command}\n\`\`\`\n\n`);

  const results: Record<string, unknown> = {};
  const verdicts: [string, boolean][] = [];
  for (const name of opts.which) {
    process.stderr.write(`\n=== ${name} ===\n`);
    const t0 = Date.now();
    const r = await BENCHES[name](opts);
    results[name] = r.data;
    verdicts.push([name, r.goalsMet]);
    process.stdout.write(`${r.markdown}\n\n(${name} took ${((Date.now() - t0) / 1000).toFixed(0)} s)\n\n`);
  }
  const total = (Date.now() - started) / 1000;
  process.stdout.write(`### verdict\n\n${verdicts.map(([n, ok]) => `- ${n}: ${ok ? 'all goals met' : 'GOAL MISSED'}`).join('\n')}\n\ntotal ${total.toFixed(0)} s; load average at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
  if (opts.json !== undefined) {
    mkdirSync(path.dirname(path.resolve(opts.json)), { recursive: true });
    writeFileSync(opts.json, `${JSON.stringify({ machine, command, options: opts, results, totalSeconds: total }, null, 2)}\n`);
    process.stderr.write(`bench: results written to ${opts.json}\n`);
  }
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`bench: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
