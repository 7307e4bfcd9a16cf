import path from 'node:path';
import type { ParseArgsConfig } from 'node:util';
import type { Config } from '../config/load.js';
import { publishConfiguredChange } from '../cluster/freshness.js';
import { readCatalogueMark } from '../cluster/mark.js';
import type { Db } from '../db/schema.js';
import { openRuntime, type Runtime } from '../runtime.js';
import { isOperatorError, OperatorError } from '../shared/errors.js';
import type { CliIo } from './io.js';

export interface CommandContext {
  args: string[];
  options: Record<string, string | boolean | string[] | undefined>;
  json: boolean;
  config(): Readonly<Config>;
  /** Which data folder this is, for messages: the one `--data-dir`, SLEEVE_DATA_DIR or `--config FILE` names, or the default. */
  dataDirFrom: string;
  /** Prints `human` normally, or `data` as one JSON line with --json. */
  out(human: string, data: unknown): void;
  io: CliIo;
}

export interface Command {
  name: string;
  options?: ParseArgsConfig['options'];
  /** Accept any flags (commands that only explain why they cannot run). */
  lenient?: boolean;
  run(ctx: CommandContext): Promise<number>;
}

/**
 * The step every catalogue command ends with: when the catalogue moved since `before` (or
 * index.json files were rewritten), publish the change and wait for the serving processes
 * to show it (cluster/freshness.ts). Never fails the command: its change is saved.
 */
export async function afterChange(config: Readonly<Config>, db: Db, before: number, filesChanged: boolean, warn: (message: string) => void): Promise<void> {
  try {
    const now = await readCatalogueMark(db);
    if (now === before && !filesChanged) return;
    await publishConfiguredChange(config, db, warn);
  } catch (err) {
    warn(`the change is saved, but serving processes could not be told of it (${(err as Error).message}); they see it at their next look at the database (SLEEVE_CHANGE_POLL_MS)`);
  }
}

/**
 * Opens the runtime for a command that works on an existing database: every command but
 * serve, migrate and demo. A missing SQLite file is never made: the message names the folder
 * looked in and how to point elsewhere (docs/cli.md).
 */
export async function openExisting(ctx: CommandContext, options: Parameters<typeof openRuntime>[1] = {}): Promise<Runtime> {
  const config = ctx.config();
  try {
    return await openRuntime(config, { ...options, create: false });
  } catch (err) {
    if (!isOperatorError(err) || err.code !== 'NO_DATABASE' || config.database.kind !== 'sqlite') throw err;
    const file = config.database.file;
    const where =
      path.dirname(file) === config.dataDir && path.basename(file) === 'sleeve.db'
        ? `no sleeve database in ${config.dataDir} (${ctx.dataDirFrom})`
        : `no sleeve database at ${file} (SLEEVE_DATABASE_URL)`;
    throw new OperatorError('NO_DATABASE', `${where}; point sleeve at yours with --data-dir DIR or SLEEVE_DATA_DIR=DIR (or SLEEVE_DATABASE_URL), or make a new one there with sleeve migrate`, { cause: err });
  }
}
