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

/**
 * An image id written as the catalogue writes it (listings, keys, the API's redirects): decimal
 * digits, no sign, no leading zero ("0" alone is 0: an imported dump may hold it), at most
 * Number.MAX_SAFE_INTEGER (sleeve's ids are JavaScript numbers). Any other spelling names no
 * image, so no file is ever fetched or made under a second name for one (docs/decisions.md,
 * "Pull-through", its entry "One spelling per id").
 */
export const ID_PATTERN = '(?:0|[1-9][0-9]{0,15})';

const ID_RE = new RegExp(`^${ID_PATTERN}$`);

/** The id `text` spells in the catalogue's own way (ID_PATTERN), or undefined. */
export function parseId(text: string): number | undefined {
  if (!ID_RE.test(text)) return undefined;
  const id = Number(text);
  return Number.isSafeInteger(id) ? id : undefined;
}
