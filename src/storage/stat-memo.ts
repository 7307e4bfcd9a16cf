import type { Stats } from 'node:fs';

/** Rows of a memo: 2^16 of 32 bytes, 2 MiB (docs/decisions.md, "The stat of an image file remembered"). */
export const MEMO_ROWS = 1 << 16;

/**
 * What fstat said of files whose key never names other bytes (an image's: ids are never
 * reused), by key: size, inode and modification time, enough for the file's ETag and
 * Last-Modified. A file remembered is read again with open, one read of its size plus a byte
 * (the size confirmed: one byte more or fewer and it is described afresh) and close, without the
 * fstat and the `Stats` object (four `Date`s in Node 20) it costs: ~2 % of a cold file's CPU where
 * a system call is dear (docs/decisions.md, "The stat of an image file remembered").
 *
 * One `Float64Array` of direct-mapped rows (size, inode, mtime and a check), found by two
 * hashes of the key: a lookup touches one cache line and no object, where a `Map` of string
 * keys read a bucket, an entry, a key and its info from memory cold in the CPU's caches and
 * cost more than the fstat (bench/RESULTS-archive.md, "Session 19: image files read without their
 * fstat"). A key whose row another took is described afresh and takes it back. Two keys of the
 * same row and check (one in ~2^32 of those that share a row) would lend one file the other's
 * inode and time in its ETag, at a size checked against its own.
 */
export class StatMemo {
  /** Per row: check (0: empty), size, inode, mtimeMs. */
  private readonly rows: Float64Array;
  private readonly mask: number;
  /** The key last hashed, its row (an index into rows) and its check. */
  private hashedKey: string | undefined;
  private row = 0;
  private check = 0;
  /**
   * Part of every check (above its 32 bits of hash): moved on by `clear`, so rows of before no
   * longer match, with no page of the table touched.
   */
  private generation = 0;

  constructor(rows: number = MEMO_ROWS) {
    let n = 1;
    while (n < rows) n *= 2;
    this.rows = new Float64Array(n * 4);
    this.mask = n - 1;
  }

  /** Sets row and check for `key`: FNV-1a for the row, the same walk with another prime and basis for the check. */
  private hash(key: string): void {
    if (key === this.hashedKey) return;
    let h = 0x811c9dc5;
    let c = 0x2f6b1a93;
    for (let i = 0; i < key.length; i++) {
      const ch = key.charCodeAt(i);
      h = Math.imul(h ^ ch, 0x01000193);
      c = Math.imul(c ^ ch, 0x5bd1e995);
    }
    this.hashedKey = key;
    this.row = (h & this.mask) * 4;
    // Never 0, the empty row's; exact as a double (under 2^53).
    this.check = (c >>> 0) + 1 + this.generation * 2 ** 32;
  }

  /** The row remembered for `key` (pass it to size, ino and mtimeMs), or -1. */
  find(key: string): number {
    this.hash(key);
    return this.rows[this.row] === this.check ? this.row : -1;
  }

  size(row: number): number {
    return this.rows[row + 1] as number;
  }

  ino(row: number): number {
    return this.rows[row + 2] as number;
  }

  mtimeMs(row: number): number {
    return this.rows[row + 3] as number;
  }

  /** Remembers what `st` says of `key`'s file, unless its inode is past what a double holds exactly. */
  remember(key: string, st: Stats): void {
    if (st.ino > Number.MAX_SAFE_INTEGER) return;
    this.hash(key);
    const rows = this.rows;
    const r = this.row;
    rows[r] = this.check;
    rows[r + 1] = st.size;
    rows[r + 2] = st.ino;
    rows[r + 3] = st.mtimeMs;
  }

  /** Forgets `key` (its file was written, moved, or is not what was remembered). */
  forget(key: string): void {
    if (this.find(key) >= 0) this.rows[this.row] = 0;
  }

  /** Forgets every key (a folder of them was removed). */
  clear(): void {
    this.hashedKey = undefined;
    if (++this.generation < 2 ** 20) return;
    this.generation = 0;
    this.rows.fill(0);
  }
}
