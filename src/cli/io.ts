/**
 * What a command reads and writes besides its database and files: the process's own streams
 * and environment when run as `sleeve`; a test's when it runs the CLI in its own process.
 */
export interface CliIo {
  /** The SLEEVE_* settings are read from here. */
  env: Readonly<Record<string, string | undefined>>;
  stdin: AsyncIterable<Buffer>;
  stdout: CliOut;
  stderr: CliOut;
}

/** A stream a command writes to; `isTTY` and `columns` as a terminal's has them. */
export interface CliOut {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/** The process's own: what `sleeve` runs with. */
export const PROCESS_IO: CliIo = process;
