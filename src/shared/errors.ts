/**
 * sleeve's one error taxonomy. Domain code throws these; each wire format (the
 * cover art API, the CLI, later OAuth) decides how to show them.
 */
export type ErrorCode =
  | 'BAD_REQUEST'
  | 'NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'NOT_ACCEPTABLE'
  | 'NOT_IMPLEMENTED'
  | 'RATE_LIMITED'
  | 'INVALID_INPUT'
  | 'CONFLICT'
  | 'CONFIG'
  | 'STORE_UNAVAILABLE';

const STATUS: Record<ErrorCode, number> = {
  BAD_REQUEST: 400,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  NOT_ACCEPTABLE: 406,
  NOT_IMPLEMENTED: 501,
  RATE_LIMITED: 503,
  INVALID_INPUT: 400,
  CONFLICT: 409,
  CONFIG: 500,
  STORE_UNAVAILABLE: 503,
};

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Whether `message` may be shown to a client (status < 500 unless said otherwise). */
  readonly expose: boolean;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AppError';
    this.code = code;
    this.status = STATUS[code];
    this.expose = this.status < 500;
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
  return err instanceof AppError || (err instanceof Error && err.name === 'AppError' && typeof (err as AppError).code === 'string' && typeof (err as AppError).status === 'number');
}

/** The object store cannot be used just now (unreachable, timing out, refusing access, or no such bucket). */
export function storeUnavailable(message: string, cause?: unknown): AppError {
  return new AppError('STORE_UNAVAILABLE', message, { cause });
}

export function isStoreUnavailable(err: unknown): boolean {
  return isAppError(err) && err.code === 'STORE_UNAVAILABLE';
}
