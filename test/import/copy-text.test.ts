/*
 * The COPY text format parser against PostgreSQL's rules (sql-copy, "Text Format"), through
 * parseRow, what the import reads each line with; and the progress output. Pure functions:
 * unit tests.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseRow, RowError, type Column } from '../../src/import/copy-text.js';
import { plainReporter, ttyReporter } from '../../src/import/progress.js';

const text: Column = { name: 'name', type: 'text', nullable: false };

/** A line of one column `col`, read as the import reads it: the value. */
function value(raw: string, col: Column = text): string | number | null | undefined {
  const out: (string | number | null)[] = [];
  parseRow(raw, [col], out);
  return out[0];
}

/** A line of `n` nullable text columns, read as the import reads it: its raw fields. */
function fields(line: string, n: number): string[] {
  return parseRow(line, Array.from({ length: n }, (_, i) => ({ name: `c${i}`, type: 'text', nullable: true }) as Column), []);
}

const timestamp: Column = { name: 'at', type: 'timestamptz', nullable: false };

describe('COPY text format', () => {
  it('unescapes as PostgreSQL does', () => {
    const cases: [string, string][] = [
      ['plain', 'plain'],
      ['a\\tb\\nc\\rd', 'a\tb\nc\rd'],
      ['\\b\\f\\v', '\b\f\v'],
      ['back\\\\slash', 'back\\slash'],
      // Any other escaped character stands for itself, \N inside a value too.
      ['\\"q\\" \\N \\a', '"q" N a'],
      // Octal: one to three digits; hex: \x and one or two digits; bytes decode as UTF-8 together.
      ['\\101\\60\\0601', 'A001'],
      ['\\x41\\x4a\\x4', 'AJ\u0004'],
      ['\\303\\251t\\xc3\\xa9', 'été'],
      // \x without a hex digit is an x.
      ['\\xyz', 'xyz'],
      // Octal values wrap at a byte, as PostgreSQL's & 0377.
      ['\\501', 'A'],
    ];
    for (const [raw, want] of cases) assert.equal(value(raw), want, raw);
  });

  it('refuses escapes PostgreSQL refuses', () => {
    assert.throws(() => value('bad \\377'), /not UTF-8/);
    assert.throws(() => value('\\xc3'), /not UTF-8/);
    assert.throws(() => value('nul \\0 here'), /zero byte/);
    assert.throws(() => value('end\\'), /backslash ends the line/);
  });

  it('splits on tabs that are not escaped', () => {
    assert.deepEqual(fields('a\tb\t\\N\t', 4), ['a', 'b', '\\N', '']);
    assert.deepEqual(fields('a\\\tb\tc', 2), ['a\\\tb', 'c']);
    assert.deepEqual(fields('a\\\\\tb', 2), ['a\\\\', 'b']);
    const out: (string | number | null)[] = [];
    parseRow('x\\\ty\tz', [text, text], out);
    assert.deepEqual(out, ['x\ty', 'z']);
  });

  it('converts each column type and checks it', () => {
    assert.equal(value('\\N', { name: 'c', type: 'int', nullable: true }), null);
    assert.throws(() => value('\\N', { name: 'c', type: 'int', nullable: false }), /column c is NULL/);
    assert.equal(value('-2147483648', { name: 'c', type: 'int', nullable: false }), -2147483648);
    assert.throws(() => value('2147483648', { name: 'c', type: 'int', nullable: false }), /not an integer/);
    assert.throws(() => value('1.5', { name: 'c', type: 'int', nullable: false }), /not an integer/);
    assert.throws(() => value('', { name: 'c', type: 'int', nullable: false }), /not an integer/);
    assert.throws(() => value('40000', { name: 'c', type: 'smallint', nullable: false }), /not a smallint/);
    assert.equal(value('38000000000', { name: 'c', type: 'bigint', nullable: false }), 38000000000);
    assert.throws(() => value('0', { name: 'c', type: 'int', nullable: false, check: 'positive' }), /greater than 0/);
    assert.throws(() => value('-1', { name: 'c', type: 'int', nullable: false, check: 'non-negative' }), /not be negative/);
    assert.equal(value('76DF3287-6CDA-33EB-8E9A-044B5E15FFDD', { name: 'g', type: 'uuid', nullable: false }), '76df3287-6cda-33eb-8e9a-044b5e15ffdd');
    assert.throws(() => value('76df3287-6cda-33eb-8e9a-044b5e15ffd', { name: 'g', type: 'uuid', nullable: false }), /not a UUID/);
    assert.equal(value('a\\tb', text), 'a\tb');
  });

  it('reads PostgreSQL timestamps to epoch milliseconds', () => {
    assert.equal(value('2012-01-26 00:54:05.519372+00', timestamp), Date.UTC(2012, 0, 26, 0, 54, 5, 519));
    assert.equal(value('2012-01-26 00:54:05+00', timestamp), Date.UTC(2012, 0, 26, 0, 54, 5));
    assert.equal(value('2012-01-26 02:54:05.5+02', timestamp), Date.UTC(2012, 0, 26, 0, 54, 5, 500));
    assert.equal(value('2012-01-26 00:24:05-00:30', timestamp), Date.UTC(2012, 0, 26, 0, 54, 5));
    assert.equal(value('1900-01-01 00:00:00+00:53:28', timestamp), Date.UTC(1899, 11, 31, 23, 6, 32));
    assert.equal(value('2024-02-29 24:00:00+00', timestamp), Date.UTC(2024, 2, 1));
    for (const bad of ['2023-02-29 00:00:00+00', '2012-13-01 00:00:00+00', '2012-01-26', 'infinity', '2012-01-26 00:54:05+00 BC', '2012-01-26 24:00:01+00']) {
      assert.throws(() => value(bad, timestamp), /not a timestamp/, bad);
    }
  });

  it('parses a row, counting columns and returning the raw fields', () => {
    const cols: Column[] = [
      { name: 'id', type: 'int', nullable: false },
      { name: 'name', type: 'text', nullable: true },
    ];
    const out: (string | number | null)[] = [];
    assert.deepEqual(parseRow('7\tA\\tB', cols, out), ['7', 'A\\tB']);
    assert.deepEqual(out, [7, 'A\tB']);
    assert.throws(() => parseRow('7', cols, out), (err: unknown) => err instanceof RowError && /1 column where 2 were expected \(id, name\)/.test((err as Error).message));
    assert.throws(() => parseRow('7\ta\tb', cols, out), /3 columns where 2/);
    assert.throws(() => parseRow('7\ta\rb', cols, out), /carriage return/);
    assert.throws(() => parseRow('7\tab\\', cols, out), /backslash ends the line/);
    // An even run of backslashes at the end is escaped backslashes, not a dangling one.
    parseRow('7\tab\\\\', cols, out);
    assert.equal(out[1], 'ab\\');
  });
});

describe('import progress output', () => {
  const sink = () => {
    const chunks: string[] = [];
    return { out: { write: (s: string) => chunks.push(s), columns: 120 }, text: () => chunks.join('') };
  };

  it('draws a bar in place on a terminal: share, bytes, rate and time left', () => {
    let now = 0;
    const s = sink();
    const r = ttyReporter(s.out, () => now);
    r.fileStart('cover_art_archive.cover_art', 100 * 1048576, 0, 1);
    now = 10_000;
    r.fileProgress(25 * 1048576, 500_000);
    const bar = s.text().split('\r\x1b[2K').at(-1) as string;
    assert.match(bar, /^cover_art\s+█{6}░{18}\s+25%\s+25 MiB\/100 MiB\s+50,000 rows\/s\s+ETA 0:30$/);
    r.fileDone('cover_art_archive.cover_art', 2_000_000, 3, 40_000);
    assert.match(s.text(), /✓ mbdump\/cover_art_archive\.cover_art: 2,000,000 rows \(3 malformed skipped\) in 0:40 \(50,000 rows\/s\)\n$/);
    r.end();
    // A narrow terminal gets the figures without the bar.
    const narrow = sink();
    const n = ttyReporter({ ...narrow.out, columns: 60 }, () => now);
    n.fileStart('release', 100, 0, 1);
    n.fileProgress(50, 10);
    assert.match(narrow.text().split('\r\x1b[2K').at(-1) as string, /^release\s+50%\s+0\.0 MiB\/0\.0 MiB/);
  });

  it('writes one line per file otherwise', () => {
    const s = sink();
    const r = plainReporter(s.out);
    r.fileStart('release', 10, 0, 1);
    r.fileProgress(5, 5);
    r.fileDone('release', 1234, 0, 1500);
    r.applyStart();
    r.applyDone(2500);
    assert.equal(
      s.text(),
      "mbdump/release: 1,234 rows read in 1.5 s\napplying the staged rows to sleeve's catalogue (one transaction)\napplied in 2.5 s\n",
    );
  });
});
