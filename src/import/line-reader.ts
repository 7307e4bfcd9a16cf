import { createReadStream } from 'node:fs';

/** Complete lines found in one piece of a file. */
export interface LineBatch {
  buf: Buffer;
  /** Start of each line in `buf`. */
  starts: number[];
  /** End of each line in `buf` (its newline, or the end of the file for a last line without one). */
  ends: number[];
  /** File offset of `buf[0]`. */
  base: number;
  /** False only for a last line that has no newline. */
  terminated: boolean;
}

export class LineTooLongError extends Error {
  constructor(readonly offset: number, readonly limit: number) {
    super(`a line longer than ${limit} bytes`);
  }
}

const READ_SIZE = 1 << 20;

/**
 * Reads a file from `start` (a line boundary), or a stream of bytes (then `start` is 0), in
 * pieces of about a megabyte and yields the complete lines of each. Memory stays within a
 * piece plus the longest line, which may not exceed `maxLineBytes`.
 */
export async function* readLineBatches(file: string | (AsyncIterable<Buffer> & { destroy(): void }), start: number, maxLineBytes: number): AsyncGenerator<LineBatch> {
  const stream = typeof file === 'string' ? createReadStream(file, { start, highWaterMark: READ_SIZE }) : file;
  let carry: Buffer | undefined;
  let base = start;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      const data = carry === undefined ? chunk : Buffer.concat([carry, chunk]);
      const starts: number[] = [];
      const ends: number[] = [];
      let pos = 0;
      for (;;) {
        const nl = data.indexOf(10, pos);
        if (nl === -1) break;
        starts.push(pos);
        ends.push(nl);
        pos = nl + 1;
      }
      carry = pos < data.length ? data.subarray(pos) : undefined;
      if (carry !== undefined && carry.length > maxLineBytes) throw new LineTooLongError(base + pos, maxLineBytes);
      if (starts.length > 0) yield { buf: data, starts, ends, base, terminated: true };
      base += pos;
    }
  } finally {
    stream.destroy();
  }
  if (carry !== undefined) yield { buf: carry, starts: [0], ends: [carry.length], base, terminated: false };
}
