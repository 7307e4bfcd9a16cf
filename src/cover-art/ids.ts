/** The epoch of cover art ids: 2012-01-25 22:01:45 UTC, in ms. */
const ID_EPOCH_MS = 1_327_528_905_000;

/**
 * The interface's file-name formula `int((time() - 1327528905) * 100)`: hundredths
 * of a second since the epoch above. Integer arithmetic, so no float rounding.
 */
export function idForTime(nowMs: number): number {
  return Math.floor((nowMs - ID_EPOCH_MS) / 10);
}

/** The time (ms) an id was allocated at, to the hundredth of a second. */
export function timeOfId(id: number): number {
  return id * 10 + ID_EPOCH_MS;
}
