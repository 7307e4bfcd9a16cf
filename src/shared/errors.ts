/**
 * sleeve's domain errors. Domain code throws an AppError with one of four codes; each wire
 * format shows it its own way, in one place (docs/decisions.md, "One error model"):
 *
 * - INVALID_INPUT: bad input to a command or a form (a name taken by nobody's rules, a bad
 *   redirect URL, an image sleeve cannot read). CLI: the message, exit status 2. Account
 *   pages: the form again with the message, 400 (routes/pages/shared.ts, formAction).
 * - NOT_FOUND: no such user, release, image or application. CLI: exit status 2. Account
 *   pages: a 404 error page (routes/pages/shared.ts, pageErrors).
 * - CONFLICT: the change cannot be made as things stand (the user or release already exists,
 *   another import runs, the release changed meanwhile). CLI: exit status 2.
 * - STORE_UNAVAILABLE: the object store cannot be used just now. CLI: exit status 1. The
 *   file server (/download/): 503 with Retry-After; `serve` and the catalogue watch retry.
 *
 * In the CLI the code is also the `--json` error object's `code` (cli/errors.ts, which adds
 * CONFIG, USAGE, INTERRUPTED and INTERNAL). OAuth protocol errors are not AppErrors: they are
 * OAuthError (auth/errors.ts), answered as RFC 6749 JSON or as an error page.
 */
export type ErrorCode = 'INVALID_INPUT' | 'NOT_FOUND' | 'CONFLICT' | 'STORE_UNAVAILABLE';

export class AppError extends Error {
  readonly code: ErrorCode;
  /** Whether the caller can fix it (all but STORE_UNAVAILABLE): the CLI exits 2, not 1, and a page shows the message. */
  readonly expose: boolean;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AppError';
    this.code = code;
    this.expose = code !== 'STORE_UNAVAILABLE';
  }
}

/** Bad input to a command or domain function: the CLI prints the message and exits 2. */
export function invalidInput(message: string): AppError {
  return new AppError('INVALID_INPUT', message);
}

export function notFound(message: string): AppError {
  return new AppError('NOT_FOUND', message);
}

/** Also true for an AppError of another copy of this module (the bundled CLI calls the unbundled server). */
export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError || (err instanceof Error && err.name === 'AppError' && typeof (err as AppError).code === 'string' && typeof (err as AppError).expose === 'boolean');
}

/** The object store cannot be used just now (unreachable, timing out, refusing access, or no such bucket). */
export function storeUnavailable(message: string, cause?: unknown): AppError {
  return new AppError('STORE_UNAVAILABLE', message, { cause });
}

export function isStoreUnavailable(err: unknown): boolean {
  return isAppError(err) && err.code === 'STORE_UNAVAILABLE';
}

/**
 * A routine failure the operator fixes outside sleeve: the database missing, unreachable or
 * without sleeve's tables, a listen address taken, a configured file missing. The message is one line that says what to
 * change; the CLI prints it without a stack and exits 1 (cli/errors.ts), the code is its
 * `--json` error code.
 */
export type OperatorErrorCode = 'NO_DATABASE' | 'DATABASE_UNREACHABLE' | 'NOT_MIGRATED' | 'CANNOT_LISTEN' | 'UNREADABLE_FILE';

export class OperatorError extends Error {
  readonly code: OperatorErrorCode;
  constructor(code: OperatorErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'OperatorError';
    this.code = code;
  }
}

/** Also true for an OperatorError of another copy of this module (the bundled CLI calls the unbundled server). */
export function isOperatorError(err: unknown): err is OperatorError {
  return err instanceof OperatorError || (err instanceof Error && err.name === 'OperatorError' && typeof (err as OperatorError).code === 'string');
}
