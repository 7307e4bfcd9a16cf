import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError, loadConfig, readConfigFile, VARIABLES, type Config } from '../config/load.js';
import { isAppError } from '../shared/errors.js';
import { COMMANDS, type CommandContext } from './commands.js';

const USAGE = `usage: sleeve [--config FILE] [--json] COMMAND ...

  serve [--only coverart|auth]          run the listeners (cover art http, auth https)
  migrate                               apply database migrations
  demo                                  load the demo catalogue
  release add MBID --release-group RG_MBID [--title T] [--date YYYY[-MM[-DD]]]
  release merge OLD_MBID INTO_MBID      the old MBID then resolves to the new one
  release-group set-cover RG_MBID RELEASE_MBID
  art add RELEASE_MBID FILE [--type NAME]... [--comment TEXT] [--edit N] [--approved]
  art edit RELEASE_MBID IMAGE_ID [--type NAME]... [--comment TEXT] [--approved|--unapproved]
  art remove RELEASE_MBID IMAGE_ID
  art reorder RELEASE_MBID IMAGE_ID...
  art reindex [RELEASE_MBID]            rewrite index.json from the database
  user add NAME --email EMAIL --password-stdin [--email-verified] [--website URL]
           [--gender G] [--zoneinfo TZ] [--birth-date YYYY-MM-DD] [--country CC]
  app add --owner NAME --name NAME --type confidential|public [--redirect-uri URI] [--resource-server]
  app edit CLIENT_ID [--name NAME] [--redirect-uri URI] [--resource-server|--no-resource-server]
  import musicbrainz DIR [--skip-malformed] [--restart] [--batch-rows N]
                                        load a MusicBrainz dump (resumable; see README)

Configuration comes from SLEEVE_* environment variables (see README) and --config FILE.
`;

export class UsageError extends Error {}

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
      options: { config: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: false,
    });
    json = globals.values.json === true;
    const positionals = globals.positionals;
    if (globals.values.help === true) {
      process.stdout.write(USAGE);
      return 0;
    }
    // A usage error like any other: the message on stderr (and --json's error object on stdout), exit 2.
    if (positionals.length === 0) throw new UsageError('no command given');
    const [first = '', second = ''] = positionals;
    const command = COMMANDS[`${first} ${second}`] ?? COMMANDS[first];
    if (command === undefined) throw new UsageError(`unknown command: ${positionals.slice(0, 2).join(' ')}`);
    const skip = command.name.split(' ').length;
    const rest = stripGlobals(argv);
    const parsed = parseArgs({
      args: rest,
      options: command.options ?? {},
      allowPositionals: true,
      strict: command.lenient !== true,
    } satisfies ParseArgsConfig);
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

function reportError(err: unknown, json: boolean): number {
  let code: string;
  let message: string;
  let exit: number;
  if (err instanceof ConfigError) {
    code = 'CONFIG';
    message = `${err.message}\nSee the README for the variables: ${Object.keys(VARIABLES).join(', ')}`;
    exit = 2;
  } else if (isAppError(err)) {
    code = err.code;
    message = err.message;
    exit = err.expose ? 2 : 1;
  } else if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    code = 'USAGE';
    message = `${(err as Error).message}\n\n${USAGE}`;
    exit = 2;
  } else {
    code = 'INTERNAL';
    message = (err as Error)?.stack ?? String(err);
    exit = 1;
  }
  if (json) process.stdout.write(`${JSON.stringify({ error: { code, message: code === 'USAGE' ? message.split('\n')[0] : message } })}\n`);
  process.stderr.write(`sleeve: ${message}\n`);
  return exit;
}

