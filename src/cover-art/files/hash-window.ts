/**
 * A set of 30-bit non-negative integers (file-cache.ts keyHash values) of at most `max`
 * members, for the file cache's doorkeeper: one preallocated Int32Array, open addressing with linear probing, a removal
 * shifting the members after it back (no tombstones), emptied by zeroing. A `Set` of
 * integers rehashed its table into a new one every few hundred additions and removals, and
 * emptied into a new one at each restart of the window: tables that lived about as long as a
 * young-generation collection takes to come, were promoted and then left as garbage in the old
 * generation, a few hundred KB a second on a cold set (bench/RESULTS-archive.md, "Session 12: cold set peak RSS").
 * The array is zero-filled at creation: pages never reached are not resident.
 */
export class HashWindow {
  /** Member + 1 per slot; 0 is an empty slot. */
  private readonly slots: Int32Array;
  private readonly mask: number;
  private count = 0;
  readonly max: number;

  constructor(max: number) {
    this.max = max;
    let capacity = 16;
    while (capacity < max * 2) capacity *= 2;
    this.slots = new Int32Array(capacity);
    this.mask = capacity - 1;
  }

  get size(): number {
    return this.count;
  }

  /** Adds `h`; false when the set is full (`max` members) and `h` is not one. */
  add(h: number): boolean {
    const slots = this.slots;
    const v = h + 1;
    let i = h & this.mask;
    for (let s = slots[i] as number; s !== 0; s = slots[i] as number) {
      if (s === v) return true;
      i = (i + 1) & this.mask;
    }
    if (this.count >= this.max) return false;
    slots[i] = v;
    this.count++;
    return true;
  }

  /** Removes `h`; whether it was a member. */
  delete(h: number): boolean {
    const slots = this.slots;
    const mask = this.mask;
    const v = h + 1;
    let i = h & mask;
    for (let s = slots[i] as number; s !== v; s = slots[i] as number) {
      if (s === 0) return false;
      i = (i + 1) & mask;
    }
    // Shift back each following member of the run whose home slot is not between the hole and it.
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const s = slots[j] as number;
      if (s === 0) break;
      const home = (s - 1) & mask;
      const stays = i < j ? home > i && home <= j : home > i || home <= j;
      if (!stays) {
        slots[i] = s;
        i = j;
      }
    }
    slots[i] = 0;
    this.count--;
    return true;
  }

  clear(): void {
    if (this.count === 0) return;
    this.slots.fill(0);
    this.count = 0;
  }
}
