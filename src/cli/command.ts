import type { ParseArgsConfig } from 'node:util';
import type { Config } from '../config/load.js';
import { publishConfiguredChange } from '../cluster/freshness.js';
import { readCatalogueMark } from '../cluster/mark.js';
import type { Db } from '../db/schema.js';

export interface CommandContext {
  args: string[];
  options: Record<string, string | boolean | string[] | undefined>;
  json: boolean;
  config(): Readonly<Config>;
  /** Prints `human` normally, or `data` as one JSON line with --json. */
  out(human: string, data: unknown): void;
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
