import { existsSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { loadConfig, readConfigFile, type Config } from '../config/load.js';
import { COMMANDS, type Command, type CommandContext } from './commands.js';
import { invalidInput } from '../shared/errors.js';
import { reportError, UsageError } from './errors.js';
import { commandHelp, groupHelp, USAGE, version } from './help.js';
import { EDIT_COMMANDS } from './edit-command.js';
import { KEYS_COMMANDS } from './keys-command.js';
import { LIST_COMMANDS } from './list-commands.js';
import { MEASURE_COMMANDS } from './measure-command.js';
import { MIRROR_COMMANDS } from './mirror-command.js';
import { TLS_COMMANDS } from './tls-command.js';
import { PROCESS_IO, type CliIo } from './io.js';

/** Every command: the catalogue and account commands, the read-only listings, the edits', the signing keys', the mirror's, `art measure` and `tls init`. */
const ALL_COMMANDS: Record<string, Command> = { ...COMMANDS, ...LIST_COMMANDS, ...EDIT_COMMANDS, ...KEYS_COMMANDS, ...MIRROR_COMMANDS, ...MEASURE_COMMANDS, ...TLS_COMMANDS };

/**
 * A bad option as one line naming it and where its command's help is, instead of
 * node:util's advice about positionals and the whole global usage.
 */
function optionError(err: unknown, command: Command): unknown {
  const code = (err as { code?: string }).code;
  const message = (err as Error).message ?? '';
  const see = `see: sleeve ${command.name} --help`;
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const flag = /^Unknown option '([^']*)'/.exec(message)?.[1] ?? '';
    const known = Object.keys(command.options ?? {}).map((o) => `--${o}`);
    const which = known.length === 0 ? `sleeve ${command.name} takes no options` : `its options: ${known.join(', ')}`;
    return new UsageError(`unknown option ${flag} for sleeve ${command.name} (${which}; ${see})`, true);
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const flag = /'(-[^' ]*)/.exec(message)?.[1] ?? '';
    const takesValue = message.includes('argument missing');
    return new UsageError(`option ${flag} of sleeve ${command.name} ${takesValue ? 'needs a value' : 'takes no value'} (${see})`, true);
  }
  return err;
}

/** The settings: --config FILE, over it the environment, over both --data-dir. */
function configFrom(file: string | undefined, dataDir: string | undefined, environment: CliIo['env']): Readonly<Config> {
  if (file !== undefined && !existsSync(file)) throw invalidInput(`--config ${file}: no such file`);
  const fromFile = file === undefined ? {} : readConfigFile(file);
  // The environment wins over the file, so one setting can be changed for one run.
  const env: Record<string, string | undefined> = { ...fromFile };
  for (const [k, v] of Object.entries(environment)) if (k.startsWith('SLEEVE_') && v !== undefined && v !== '') env[k] = v;
  if (dataDir !== undefined) env.SLEEVE_DATA_DIR = dataDir;
  return loadConfig(env);
}

/** Where the data folder's setting comes from, as messages say it. */
function dataDirFrom(dataDir: string | undefined, file: string | undefined, environment: CliIo['env']): string {
  if (dataDir !== undefined) return 'the data folder --data-dir names';
  const env = environment.SLEEVE_DATA_DIR;
  if (env !== undefined && env !== '') return 'the data folder SLEEVE_DATA_DIR names';
  if (file !== undefined) {
    try {
      if (readConfigFile(file).SLEEVE_DATA_DIR !== undefined) return `the data folder SLEEVE_DATA_DIR of ${file} names`;
    } catch {
      // a bad file is reported by config()
    }
  }
  return 'the default data folder ./data of the current folder, as SLEEVE_DATA_DIR is unset';
}

/** The options sleeve itself takes, before or after the command. */
const GLOBAL_OPTIONS = {
  config: { type: 'string' },
  'data-dir': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'V' },
  // -v: the short form people try first; the same as --version.
  v: { type: 'boolean', short: 'v' },
} as const satisfies ParseArgsConfig['options'];

/** The usage error for a command line that names no command that exists. */
function noSuchCommand(positionals: string[], unknownFlags: string[]): UsageError {
  const [first = '', second] = positionals;
  if (positionals.length === 0) {
    if (unknownFlags.length === 0) return new UsageError('no command given');
    return new UsageError(`unknown option ${unknownFlags.join(', ')} and no command given (sleeve's own options: --config FILE, --data-dir DIR, --json, --help, --version; a command's come after it)`);
  }
  const group = groupHelp(first);
  if (group === undefined) return new UsageError(`unknown command: ${first}`);
  const subcommands = Object.keys(ALL_COMMANDS)
    .filter((name) => name.startsWith(`${first} `))
    .map((name) => name.slice(first.length + 1));
  const what = second === undefined ? `sleeve ${first} needs a subcommand` : `unknown command: ${first} ${second}`;
  return new UsageError(`${what}: one of ${subcommands.join(', ')}\n\n${group}`, true);
}

/** Runs the CLI with the process's streams and environment (or `io`'s); resolves to the exit code. */
export async function main(argv: string[], io: CliIo = PROCESS_IO): Promise<number> {
  let json = argv.includes('--json');
  try {
    const globals = parseArgs({ args: argv, options: GLOBAL_OPTIONS, allowPositionals: true, strict: false });
    json = globals.values.json === true;
    // `sleeve help [COMMAND]` is `sleeve [COMMAND] --help`.
    const wantsHelp = globals.values.help === true || globals.positionals[0] === 'help';
    const positionals = globals.positionals[0] === 'help' ? globals.positionals.slice(1) : globals.positionals;
    if (globals.values.version === true || globals.values.v === true) {
      if (json) io.stdout.write(`${JSON.stringify({ version: version() })}\n`);
      else io.stdout.write(`sleeve ${version()}\n`);
      return 0;
    }
    const [first = '', second = ''] = positionals;
    const command = ALL_COMMANDS[`${first} ${second}`] ?? ALL_COMMANDS[first];
    if (wantsHelp) {
      if (positionals.length === 0) io.stdout.write(USAGE);
      else if (command !== undefined) io.stdout.write(commandHelp(command));
      else {
        const group = groupHelp(first);
        if (group === undefined) throw new UsageError(`unknown command: ${positionals.slice(0, 2).join(' ')}`);
        io.stdout.write(group);
      }
      return 0;
    }
    // A usage error like any other: the message on stderr (and --json's error object on stdout), exit 2.
    if (command === undefined) {
      const unknownFlags = Object.keys(globals.values)
        .filter((name) => !(name in GLOBAL_OPTIONS))
        .map((name) => (name.length === 1 ? `-${name}` : `--${name}`));
      throw noSuchCommand(positionals, unknownFlags);
    }
    const skip = command.name.split(' ').length;
    const rest = stripGlobals(argv);
    let parsed;
    try {
      parsed = parseArgs({
        args: rest,
        options: command.options ?? {},
        allowPositionals: true,
        strict: command.lenient !== true,
      } satisfies ParseArgsConfig);
    } catch (err) {
      throw optionError(err, command);
    }
    const args = parsed.positionals.slice(skip);
    const configFile = typeof globals.values.config === 'string' ? globals.values.config : undefined;
    const dataDir = typeof globals.values['data-dir'] === 'string' ? globals.values['data-dir'] : undefined;
    if (globals.values['data-dir'] === true || dataDir === '') throw new UsageError('--data-dir needs a folder: --data-dir DIR', true);
    const ctx: CommandContext = {
      args,
      options: parsed.values as Record<string, string | boolean | string[] | undefined>,
      json,
      config: () => configFrom(configFile, dataDir, io.env),
      dataDirFrom: dataDirFrom(dataDir, configFile, io.env),
      out: (human, data) => {
        if (json) io.stdout.write(`${JSON.stringify(data)}\n`);
        else if (human !== '') io.stdout.write(`${human}\n`);
      },
      io,
    };
    return await command.run(ctx);
  } catch (err) {
    return reportError(err, json, io);
  }
}

/** Removes the global flags so each command's strict parse sees only its own. */
function stripGlobals(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--json') continue;
    if (a === '--config' || a === '--data-dir') {
      i++;
      continue;
    }
    if (a.startsWith('--config=') || a.startsWith('--data-dir=')) continue;
    out.push(a);
  }
  return out;
}
