/*
 * The CLI's wire format for errors, in one place: every failure of a command reaches
 * reportError, which prints `sleeve: MESSAGE` on stderr (with --json, also
 * {"error":{"code","message"}} on stdout) and gives the exit status, by code:
 *
 * - USAGE, exit 2: no or unknown command, a bad option (with the usage, or a hint).
 * - CONFIG, exit 2: a configuration variable is missing or wrong.
 * - INVALID_INPUT, NOT_FOUND, CONFLICT, exit 2: the domain refused (shared/errors.ts).
 * - STORE_UNAVAILABLE, exit 1: the object store cannot be used just now.
 * - NO_DATABASE, DATABASE_UNREACHABLE, NOT_MIGRATED, CANNOT_LISTEN, UNREADABLE_FILE, exit 1: a routine failure
 *   the operator fixes outside sleeve (shared/errors.ts, OperatorError), one line, no stack.
 * - INTERRUPTED, exit 130 or 143: SIGINT or SIGTERM stopped `sleeve import musicbrainz`.
 * - INTERNAL, exit 1: anything else (a bug, the database down), with its stack.
 */
import { ConfigError, VARIABLES } from '../config/load.js';
import { isAppError, isOperatorError } from '../shared/errors.js';
import { USAGE } from './help.js';
import { PROCESS_IO, type CliIo } from './io.js';

export class UsageError extends Error {
  /** The message says all there is; the global usage is not appended. */
  readonly complete: boolean;
  constructor(message: string, complete = false) {
    super(message);
    this.complete = complete;
  }
}

/** A command stopped by a signal, on purpose and cleanly; exits with the signal's status (128 + its number). */
export class CommandInterrupted extends Error {
  readonly exitStatus: number;
  constructor(message: string, exitStatus: number) {
    super(message);
    this.exitStatus = exitStatus;
  }
}

/** Reports a command's failure; returns the exit status. */
export function reportError(err: unknown, json: boolean, io: Pick<CliIo, 'stdout' | 'stderr'> = PROCESS_IO): number {
  let code: string;
  let message: string;
  let exit: number;
  if (err instanceof ConfigError) {
    code = 'CONFIG';
    message = `${err.message}\nSee docs/configuration.md for the variables: ${Object.keys(VARIABLES).join(', ')}`;
    exit = 2;
  } else if (isAppError(err)) {
    code = err.code;
    message = err.message;
    exit = err.expose ? 2 : 1;
  } else if (isOperatorError(err)) {
    code = err.code;
    message = err.message;
    exit = 1;
  } else if (err instanceof CommandInterrupted) {
    code = 'INTERRUPTED';
    message = err.message;
    exit = err.exitStatus;
  } else if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    code = 'USAGE';
    message = err instanceof UsageError && err.complete ? err.message : `${(err as Error).message}\n\n${USAGE}`;
    exit = 2;
  } else {
    code = 'INTERNAL';
    message = (err as Error)?.stack ?? String(err);
    exit = 1;
  }
  if (json) io.stdout.write(`${JSON.stringify({ error: { code, message: code === 'USAGE' ? message.split('\n')[0] : message } })}\n`);
  io.stderr.write(`sleeve: ${message}\n`);
  return exit;
}
