/*
 * PostgreSQL COPY text format, as `COPY … TO stdout` writes it and MusicBrainz dumps
 * hold it: one row per line, columns separated by a tab, `\N` alone for NULL, and
 * backslash escapes in values (\b \f \n \r \t \v \\, \ooo octal and \xhh hex bytes,
 * any other escaped character standing for itself). Checks follow what PostgreSQL's
 * COPY FROM refuses, so a row accepted here is one PostgreSQL accepts too.
 */

export type ColumnType = 'int' | 'smallint' | 'bigint' | 'uuid' | 'text' | 'timestamptz';

export interface Column {
  name: string;
  type: ColumnType;
  nullable: boolean;
  /**
   * A CHECK of the MusicBrainz schema that sleeve relies on, or a shape sleeve needs: a text
   * that becomes part of a file name and a redirect's Location (`suffix`) or a content type
   * (`mime-type`) must be a plain token, never a path, a line break or a header.
   */
  check?: 'positive' | 'non-negative' | 'suffix' | 'mime-type';
}

const BACKSLASH = 92;
const TAB = 9;

const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const INT_RE = /^[+-]?\d{1,19}$/;
/** A file suffix as image_type holds them (jpg, png, gif, pdf): it ends file names and Location URLs. */
const SUFFIX_RE = /^[A-Za-z0-9]{1,10}$/;
/** type/subtype of RFC 6838's restricted names (no parameters). */
const MIME_TYPE_RE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$/;
/** PostgreSQL's ISO output of timestamptz: `2012-01-26 00:54:05.519372+00` (offsets may carry minutes and seconds). */
const TIMESTAMP_RE = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(?:([+-])(\d{2})(?::?(\d{2}))?(?::?(\d{2}))?|Z)?$/;

const LIMITS: Record<'int' | 'smallint' | 'bigint', [number, number]> = {
  smallint: [-32768, 32767],
  int: [-2147483648, 2147483647],
  // BIGINT columns (image ids) come back as JavaScript numbers in sleeve (db/schema.ts).
  bigint: [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
};

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Why a row is not acceptable, for the operator: short, no row content. */
export class RowError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RowError';
  }
}

/**
 * Splits a line into raw fields at the tabs that are not escaped. Only the slow path
 * for lines with a backslash scans character by character: a backslash followed by a
 * real tab is a tab inside a value, not a separator (PostgreSQL accepts it on input).
 */
function splitFields(line: string): string[] {
  if (!line.includes('\\')) return line.split('\t');
  const out: string[] = [];
  let start = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c === BACKSLASH) i++;
    else if (c === TAB) {
      out.push(line.slice(start, i));
      start = i + 1;
    }
  }
  out.push(line.slice(start));
  return out;
}

function simpleEscape(code: number): string | undefined {
  switch (code) {
    case 98: // b
      return '\b';
    case 102: // f
      return '\f';
    case 110: // n
      return '\n';
    case 114: // r
      return '\r';
    case 116: // t
      return '\t';
    case 118: // v
      return '\v';
    default:
      return undefined;
  }
}

function isOctal(code: number): boolean {
  return code >= 48 && code <= 55;
}

function hexValue(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 97 && code <= 102) return code - 87;
  if (code >= 65 && code <= 70) return code - 55;
  return -1;
}

/**
 * The value a raw field stands for. Octal and hex escapes give bytes, which must
 * form UTF-8 with the characters around them (PostgreSQL decodes the whole value);
 * a zero byte is refused, as PostgreSQL refuses it in text.
 */
function unescapeText(raw: string): string {
  if (!raw.includes('\\')) return raw;
  // Pieces of text and of raw bytes; bytes only appear with octal or hex escapes.
  const parts: (string | number[])[] = [];
  let text = '';
  let bytes: number[] | undefined;
  const pushByte = (b: number) => {
    if (text !== '') {
      parts.push(text);
      text = '';
    }
    if (bytes === undefined) {
      bytes = [];
      parts.push(bytes);
    }
    bytes.push(b);
  };
  const pushText = (s: string) => {
    bytes = undefined;
    text += s;
  };
  let start = 0;
  for (let i = 0; i < raw.length; i++) {
    if (raw.charCodeAt(i) !== BACKSLASH) continue;
    if (i > start) pushText(raw.slice(start, i));
    i++;
    if (i >= raw.length) throw new RowError('a backslash ends the line (a newline in a value must be written \\n)');
    const c = raw.charCodeAt(i);
    const simple = simpleEscape(c);
    if (simple !== undefined) pushText(simple);
    else if (isOctal(c)) {
      let v = c - 48;
      for (let k = 0; k < 2 && i + 1 < raw.length && isOctal(raw.charCodeAt(i + 1)); k++) v = v * 8 + (raw.charCodeAt(++i) - 48);
      pushByte(v & 0xff);
    } else if (c === 120 /* x */ && i + 1 < raw.length && hexValue(raw.charCodeAt(i + 1)) >= 0) {
      let v = hexValue(raw.charCodeAt(++i));
      if (i + 1 < raw.length && hexValue(raw.charCodeAt(i + 1)) >= 0) v = v * 16 + hexValue(raw.charCodeAt(++i));
      pushByte(v);
    } else pushText(raw[i] as string);
    start = i + 1;
  }
  if (start < raw.length) pushText(raw.slice(start));
  let value: string;
  if (parts.length === 0) value = text;
  else {
    if (text !== '') parts.push(text);
    const buf = Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p))));
    try {
      value = fatalUtf8.decode(buf);
    } catch {
      throw new RowError('an octal or hex escape makes a value that is not UTF-8');
    }
  }
  if (value.includes('\u0000')) throw new RowError('a value holds a zero byte (\\0), which PostgreSQL text cannot');
  return value;
}

/** Epoch milliseconds of a PostgreSQL timestamptz in ISO style, or undefined when it is not one. */
function parseTimestamp(raw: string): number | undefined {
  const m = TIMESTAMP_RE.exec(raw);
  if (m === null) return undefined;
  const [, y, mo, d, h, mi, s, frac, sign, oh, om, os] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  if (month < 1 || month > 12 || day < 1 || hour > 24 || minute > 59 || second > 60) return undefined;
  if (day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return undefined;
  if (hour === 24 && (minute !== 0 || second !== 0 || (frac !== undefined && Number(frac) !== 0))) return undefined;
  // Whole milliseconds, rounded down (the PostgreSQL side of the import does the same).
  const ms = frac === undefined ? 0 : Math.floor(Number(frac.padEnd(6, '0')) / 1000);
  let offset = 0;
  if (sign !== undefined) offset = (sign === '-' ? -1 : 1) * ((Number(oh) * 60 + Number(om ?? 0)) * 60 + Number(os ?? 0)) * 1000;
  return Date.UTC(year, month - 1, day, hour, minute, second, ms) - offset;
}

const TYPE_NAMES: Record<'int' | 'smallint' | 'bigint', string> = {
  int: 'an integer',
  smallint: 'a smallint (-32768 to 32767)',
  bigint: 'an integer below 2^53',
};

/**
 * Converts one raw field to its value: numbers for integers, lower-case text for
 * UUIDs, unescaped text, epoch ms for timestamps, null for `\N`. Throws RowError.
 */
function convertField(raw: string, col: Column): string | number | null {
  if (raw === '\\N') {
    if (!col.nullable) throw new RowError(`column ${col.name} is NULL (\\N) but must have a value`);
    return null;
  }
  switch (col.type) {
    case 'text': {
      const text = unescapeText(raw);
      if (col.check === 'suffix' && !SUFFIX_RE.test(text)) throw new RowError(`column ${col.name} must be a file suffix of 1 to 10 letters and digits (such as jpg), not ${JSON.stringify(text.slice(0, 60))}`);
      if (col.check === 'mime-type' && !MIME_TYPE_RE.test(text)) throw new RowError(`column ${col.name} must be a media type such as image/jpeg, not ${JSON.stringify(text.slice(0, 60))}`);
      return text;
    }
    case 'uuid':
      if (raw.length !== 36 || !UUID_RE.test(raw)) throw new RowError(`column ${col.name} is not a UUID: ${JSON.stringify(raw.slice(0, 60))}`);
      return raw.toLowerCase();
    case 'timestamptz': {
      const ms = parseTimestamp(raw);
      if (ms === undefined) throw new RowError(`column ${col.name} is not a timestamp like 2012-01-26 00:54:05.519372+00: ${JSON.stringify(raw.slice(0, 60))}`);
      return ms;
    }
    default: {
      const [min, max] = LIMITS[col.type];
      const n = INT_RE.test(raw) ? Number(raw) : Number.NaN;
      if (!Number.isSafeInteger(n) || n < min || n > max) throw new RowError(`column ${col.name} is not ${TYPE_NAMES[col.type]}: ${JSON.stringify(raw.slice(0, 60))}`);
      if (col.check === 'positive' && n <= 0) throw new RowError(`column ${col.name} must be greater than 0, not ${n}`);
      if (col.check === 'non-negative' && n < 0) throw new RowError(`column ${col.name} must not be negative, not ${n}`);
      return n;
    }
  }
}

/**
 * Parses a line (without its newline) into `out`, one converted value per column, and
 * returns the raw fields (still escaped). Throws RowError for a wrong number of columns
 * or a bad value.
 */
export function parseRow(line: string, columns: readonly Column[], out: (string | number | null)[]): string[] {
  if (line.includes('\r')) throw new RowError('a carriage return in the data (it must be written \\r)');
  if (line.includes('\u0000')) throw new RowError('a zero byte in the data');
  if (line.endsWith('\\') && /(?:^|[^\\])(?:\\\\)*\\$/.test(line)) throw new RowError('a backslash ends the line (a newline in a value must be written \\n)');
  const fields = splitFields(line);
  if (fields.length !== columns.length) {
    throw new RowError(`${fields.length} column${fields.length === 1 ? '' : 's'} where ${columns.length} were expected (${columns.map((c) => c.name).join(', ')})`);
  }
  for (let i = 0; i < columns.length; i++) out[i] = convertField(fields[i] as string, columns[i] as Column);
  return fields;
}

/** A row shown to the operator: escapes visible, cut to `max` characters. */
export function showRow(line: string, max = 160): string {
  const cut = line.length > max ? `${line.slice(0, max)}…` : line;
  return cut.replace(/\t/g, '⇥').replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}
