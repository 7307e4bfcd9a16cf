import { readFileSync } from 'node:fs';
import os from 'node:os';
import Database from 'better-sqlite3';
import sharp from 'sharp';
import { loadGenerator, wrkVersion } from './load.js';
import { ROOT } from './paths.js';
import { run, TASKSET } from './proc.js';

export interface MachineInfo {
  date: string;
  host: string;
  os: string;
  cpu: string;
  cores: number;
  memory: string;
  loadAverage: string;
  node: string;
  sharp: string;
  libvips: string;
  sqlite: string;
  loadGenerator: string;
  taskset: string;
  commit: string;
}

function osName(): string {
  try {
    const pretty = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1];
    if (pretty !== undefined) return `${pretty}, kernel ${os.release()}`;
  } catch {
    // no os-release
  }
  return `${os.type()} ${os.release()}`;
}

export async function machineInfo(): Promise<MachineInfo> {
  const sqlite = new Database(':memory:');
  const sqliteVersion = (sqlite.prepare('select sqlite_version() as v').get() as { v: string }).v;
  sqlite.close();
  const git = await run('git', ['-C', ROOT, 'describe', '--always', '--dirty']).catch(() => undefined);
  const wrk = await wrkVersion();
  const versions = sharp.versions as Record<string, string | undefined>;
  return {
    date: new Date().toISOString(),
    host: os.hostname(),
    os: osName(),
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.cpus().length,
    memory: `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
    loadAverage: os.loadavg().map((l) => l.toFixed(2)).join(' '),
    node: process.version,
    sharp: versions.sharp ?? '?',
    libvips: versions.vips ?? '?',
    sqlite: sqliteVersion,
    loadGenerator: wrk === undefined ? loadGenerator() : `${wrk} (${loadGenerator()})`,
    taskset: TASKSET === undefined ? 'not available: processes not pinned' : `${TASKSET}: servers on CPU 0, load generator on CPU 1`,
    commit: git?.code === 0 ? git.stdout.trim() : 'unknown',
  };
}

export function describeMachine(m: MachineInfo): string {
  return [
    `date:            ${m.date}`,
    `machine:         ${m.host}; ${m.os}`,
    `cpu:             ${m.cores} × ${m.cpu}; ${m.memory} RAM; load average ${m.loadAverage}`,
    `node:            ${m.node}; sharp ${m.sharp} / libvips ${m.libvips}; SQLite ${m.sqlite}`,
    `load generator:  ${m.loadGenerator}`,
    `pinning:         ${m.taskset}`,
    `sleeve commit:   ${m.commit}`,
  ].join('\n');
}
