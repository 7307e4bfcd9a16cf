import { parseArgs, type ParseArgsConfig } from 'node:util';
import { loadConfig, readConfigFile, type Config } from '../config/load.js';
import { COMMANDS, type Command, type CommandContext } from './commands.js';
import { reportError, UsageError } from './errors.js';
import { commandHelp, groupHelp, USAGE, version } from './help.js';
import { EDIT_COMMANDS } from './edit-command.js';
import { KEYS_COMMANDS } from './keys-command.js';
import { LIST_COMMANDS } from './list-commands.js';
import { MIRROR_COMMANDS } from './mirror-command.js';
import { TLS_COMMANDS } from './tls-command.js';

/** Every command: the catalogue and account commands, the read-only listings, the edits', the signing keys' and the mirror's. */
const ALL_COMMANDS: Record<string, Command> = { ...COMMANDS, ...LIST_COMMANDS, ...EDIT_COMMANDS, ...KEYS_COMMANDS, ...MIRROR_COMMANDS, ...TLS_COMMANDS };

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

function configFrom(file: string | undefined): Readonly<Config> {
  const fromFile = file === undefined ? {} : readConfigFile(file);
  // The environment wins over the file, so one setting can be changed for one run.
  const env: Record<string, string | undefined> = { ...fromFile };
  for (const [k, v] of Object.entries(process.env)) if (k.startsWith('SLEEVE_') && v !== undefined && v !== '') env[k] = v;
  return loadConfig(env);
}

/** Runs the CLI; resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  let json = argv.includes('--json');
  try {
    const globals = parseArgs({
      args: argv,
      options: { config: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'V' } },
      allowPositionals: true,
      strict: false,
    });
    json = globals.values.json === true;
    // `sleeve help [COMMAND]` is `sleeve [COMMAND] --help`.
    const wantsHelp = globals.values.help === true || globals.positionals[0] === 'help';
    const positionals = globals.positionals[0] === 'help' ? globals.positionals.slice(1) : globals.positionals;
    if (globals.values.version === true) {
      if (json) process.stdout.write(`${JSON.stringify({ version: version() })}\n`);
      else process.stdout.write(`sleeve ${version()}\n`);
      return 0;
    }
    const [first = '', second = ''] = positionals;
    const command = ALL_COMMANDS[`${first} ${second}`] ?? ALL_COMMANDS[first];
    if (wantsHelp) {
      if (positionals.length === 0) process.stdout.write(USAGE);
      else if (command !== undefined) process.stdout.write(commandHelp(command));
      else {
        const group = groupHelp(first);
        if (group === undefined) throw new UsageError(`unknown command: ${positionals.slice(0, 2).join(' ')}`);
        process.stdout.write(group);
      }
      return 0;
    }
    // A usage error like any other: the message on stderr (and --json's error object on stdout), exit 2.
    if (positionals.length === 0) throw new UsageError('no command given');
    if (command === undefined) {
      const group = groupHelp(first);
      throw new UsageError(group === undefined ? `unknown command: ${positionals.slice(0, 2).join(' ')}` : `unknown command: ${positionals.slice(0, 2).join(' ')}\n\n${group}`, group !== undefined);
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
    const ctx: CommandContext = {
      args,
      options: parsed.values as Record<string, string | boolean | string[] | undefined>,
      json,
      config: () => configFrom(configFile),
      out: (human, data) => {
        if (json) process.stdout.write(`${JSON.stringify(data)}\n`);
        else if (human !== '') process.stdout.write(`${human}\n`);
      },
    };
    return await command.run(ctx);
  } catch (err) {
    return reportError(err, json);
  }
}

/** Removes the global flags so each command's strict parse sees only its own. */
function stripGlobals(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--json') continue;
    if (a === '--config') {
      i++;
      continue;
    }
    if (a.startsWith('--config=')) continue;
    out.push(a);
  }
  return out;
}
