import type { PlainReply } from '../../shared/plain-http.js';
import type { ReadMemory } from '../../storage/index.js';

/** A buffer given back is kept only up to this size (the file server's small files). */
const KEPT_BYTES = 256 * 1024;
/** At most this many buffers are kept free. */
const KEPT_BUFFERS = 64;
/** The least a new buffer is made with, so that it serves the next small files too. */
const LEAST = 16 * 1024;

/**
 * The memory the file server lends to reads of files it answers without keeping: buffers taken
 * from a free list and given back once the answer is done with them. A fresh buffer per miss is
 * garbage that only waits for the next collection, tens of MB of it at thousands of misses a
 * second. Bounded: at most 64 buffers of up to 256 KiB wait free.
 *
 * A read made on the calling thread is given the pool itself as its memory (`lend`), and what
 * it lent is then `taken` (no other read can come between); a read that is awaited lends
 * through a `ReadMemory` of its own (`lendTo`), as other reads may lend meanwhile.
 */
export class ReadPool implements ReadMemory {
  private readonly free: Buffer[] = [];
  /** The buffer `lend` gave out last, until `taken`. */
  private last: Buffer | undefined;

  /** ReadMemory: `size` bytes of a free buffer (or a new one), remembered for `taken`. */
  lend(size: number): Buffer {
    const buf = this.take(size);
    this.last = buf;
    return buf.length === size ? buf : buf.subarray(0, size);
  }

  /** The buffer `lend` gave out for the read just made, if any, forgotten here: to give back once done with. */
  taken(): Buffer | undefined {
    const buf = this.last;
    this.last = undefined;
    return buf;
  }

  /** A ReadMemory for one awaited read: lends from the pool, and tells `lent` each buffer it gave out. */
  lendTo(lent: (buf: Buffer) => void): ReadMemory {
    return {
      lend: (size: number): Buffer => {
        const buf = this.take(size);
        lent(buf);
        return buf.subarray(0, size);
      },
    };
  }

  /** Takes back `buf` (nothing of it in use any more). */
  give(buf: Buffer | undefined): void {
    if (buf !== undefined && this.free.length < KEPT_BUFFERS && buf.length <= KEPT_BYTES) this.free.push(buf);
  }

  /**
   * Takes back `buf`, lent for `res`'s answer: at once when nothing of the answer waits in
   * memory (the socket took all of it, as it does unless the client reads slowly), else when
   * the answer is closed.
   */
  giveAfter(res: PlainReply, buf: Buffer | undefined): void {
    if (buf === undefined) return;
    if (res.writableLength === 0) this.give(buf);
    else res.once('close', () => this.give(buf));
  }

  private take(size: number): Buffer {
    const free = this.free;
    for (let i = free.length - 1; i >= 0; i--) {
      const buf = free[i] as Buffer;
      if (buf.length >= size) {
        // The last one in its place (no order to keep): no array made, as splice makes one.
        free[i] = free[free.length - 1] as Buffer;
        free.pop();
        return buf;
      }
    }
    return Buffer.allocUnsafeSlow(Math.max(size, LEAST));
  }
}
