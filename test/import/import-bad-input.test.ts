/*
 * Bad dumps: a malformed row is reported with its file, line and content, the import
 * stops with exit 2, and sleeve's catalogue is exactly as before. With --skip-malformed
 * such rows are skipped and counted instead. Rows pointing at what the dump lacks are
 * left out and counted.
 */
import assert from 'node:assert/strict';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliOk, DIALECT, makeTestEnv, runCli, type CliResult, type TestEnv } from '../helpers/env.js';
import type { Value } from '../../datagen/mbdump.js';
import { dbDump, newMbid } from '../cover-art/cli-support.js';
import { IMAGES, R, writeFixture } from './fixture.js';
import { query } from './support.js';

interface Case {
  name: string;
  file: string;
  /** 1-based line to replace, and what to put there (bytes, without the newline). */
  line: number;
  with: (old: string) => string | Buffer;
  message: RegExp;
}

const CASES: Case[] = [
  { name: 'a missing column', file: 'release', line: 3, with: (old) => old.slice(0, old.lastIndexOf('\t')), message: /13 columns where 14 were expected \(id, gid, name, / },
  { name: 'an extra column', file: 'release_gid_redirect', line: 1, with: (old) => `${old}\textra`, message: /4 columns where 3 were expected/ },
  { name: 'a bad UUID', file: 'release_group', line: 2, with: (old) => old.replace(/\t[0-9a-f-]{36}\t/, '\tnot-a-uuid\t'), message: /column gid is not a UUID: "not-a-uuid"/ },
  { name: 'a non-integer id', file: 'cover_art_archive.cover_art_type', line: 4, with: (old) => old.replace(/^\d+/, '12x4'), message: /column id is not an integer below 2\^53: "12x4"/ },
  { name: 'a non-integer ordering', file: 'cover_art_archive.cover_art', line: 4, with: (old) => replaceField(old, 4, 'first'), message: /column ordering is not an integer: "first"/ },
  { name: 'ordering 0', file: 'cover_art_archive.cover_art', line: 2, with: (old) => replaceField(old, 4, '0'), message: /column ordering must be greater than 0, not 0/ },
  { name: 'a year out of smallint range', file: 'release_country', line: 2, with: (old) => replaceField(old, 2, '99999'), message: /column date_year is not a smallint/ },
  { name: 'NULL where a value must be', file: 'release', line: 5, with: (old) => replaceField(old, 1, '\\N'), message: /column gid is NULL \(\\N\) but must have a value/ },
  { name: 'a bad timestamp', file: 'edit', line: 3, with: (old) => replaceField(old, 7, 'yesterday'), message: /column expire_time is not a timestamp/ },
  { name: 'an impossible date', file: 'cover_art_archive.cover_art', line: 5, with: (old) => replaceField(old, 5, '2013-02-30 10:00:00+00'), message: /column date_uploaded is not a timestamp/ },
  { name: 'an escape that makes no UTF-8', file: 'cover_art_archive.cover_art', line: 3, with: (old) => replaceField(old, 2, 'bad \\377 byte'), message: /an octal or hex escape makes a value that is not UTF-8/ },
  { name: 'a zero byte escape', file: 'release_group', line: 3, with: (old) => replaceField(old, 2, 'nul\\000here'), message: /zero byte/ },
  {
    name: 'bytes that are not UTF-8',
    file: 'release_group',
    line: 1,
    with: (old) => Buffer.concat([Buffer.from(replaceField(old, 2, 'X'), 'utf8').subarray(0, 5), Buffer.from([0xff, 0xfe]), Buffer.from(replaceField(old, 2, 'X'), 'utf8').subarray(5)]),
    message: /line 1: not valid UTF-8/,
  },
  { name: 'a raw carriage return', file: 'release', line: 6, with: (old) => replaceField(old, 2, 'Six\rcr'), message: /carriage return/ },
  { name: 'a backslash before the line end', file: 'release', line: 7, with: (old) => `${old}\\`, message: /a backslash ends the line/ },
  { name: 'an empty line', file: 'cover_art_archive.cover_art_type', line: 2, with: () => '', message: /1 column where 2 were expected/ },
  // Values that end up in file names, Location headers or Content-Type: only plain tokens.
  { name: 'an image suffix with an escaped CR/LF', file: 'cover_art_archive.image_type', line: 1, with: (old) => replaceField(old, 1, 'jpg\\r\\nSet-Cookie: x=1'), message: /column suffix must be a file suffix of 1 to 10 letters and digits \(such as jpg\), not "jpg\\r\\nSet-Cookie/ },
  { name: 'an image suffix with ../', file: 'cover_art_archive.image_type', line: 2, with: (old) => replaceField(old, 1, '../../etc/passwd'), message: /column suffix must be a file suffix/ },
  { name: 'an image suffix with a dot', file: 'cover_art_archive.image_type', line: 3, with: (old) => replaceField(old, 1, 'tar.gz'), message: /column suffix must be a file suffix/ },
  { name: 'an empty image suffix', file: 'cover_art_archive.image_type', line: 1, with: (old) => replaceField(old, 1, ''), message: /column suffix must be a file suffix/ },
  { name: 'a media type with a line break', file: 'cover_art_archive.image_type', line: 1, with: (old) => replaceField(old, 0, 'image/jpeg\\nX: y'), message: /column mime_type must be a media type such as image\/jpeg/ },
  { name: "an image's media type with a space", file: 'cover_art_archive.cover_art', line: 2, with: (old) => replaceField(old, 7, 'image/jpeg; x=../y'), message: /column mime_type must be a media type/ },
  { name: 'data after the end-of-data marker', file: 'release', line: 4, with: (old) => `\\.\n${old}`, message: /line 5: data after the end-of-data marker/ },
];

/**
 * Refused as bad input: exit 2, nothing on stdout, and a `sleeve: …` message on stderr
 * matching `pattern` (progress lines for the files read may come before it).
 */
function assertRefused(r: CliResult, pattern: RegExp): void {
  const where = `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
  assert.equal(r.code, 2, where);
  assert.equal(r.stdout, '', where);
  const at = r.stderr.indexOf('sleeve: ');
  assert.ok(at === 0 || (at > 0 && r.stderr[at - 1] === '\n'), `no "sleeve: " message: ${where}`);
  assert.match(r.stderr.slice(at), pattern, where);
}

function replaceField(line: string, index: number, value: string): string {
  const fields = line.split('\t');
  fields[index] = value;
  return fields.join('\t');
}

async function corrupt(dir: string, file: string, line: number, make: (old: string) => string | Buffer): Promise<string> {
  const p = path.join(dir, 'mbdump', file);
  const lines = (await readFile(p, 'utf8')).split('\n');
  const old = lines[line - 1];
  if (old === undefined || old === '') throw new Error(`${file} has no line ${line}`);
  const replacement = make(old);
  const before = Buffer.from(lines.slice(0, line - 1).map((l) => `${l}\n`).join(''), 'utf8');
  const after = Buffer.from(lines.slice(line).join('\n'), 'utf8');
  await writeFile(p, Buffer.concat([before, typeof replacement === 'string' ? Buffer.from(replacement, 'utf8') : replacement, Buffer.from('\n'), after]));
  return lines[line - 1] as string;
}

describe(`sleeve import musicbrainz: bad dumps change nothing (${DIALECT})`, () => {
  let t: TestEnv;
  let baseline: Record<string, string[]>;
  let n = 0;
  const fresh = async (edit?: (tables: Record<string, Value[][]>) => void) => writeFixture(path.join(t.dir, `dump-${++n}`), edit === undefined ? {} : { edit });
  const state = async () => ({
    ...(await dbDump(t)),
    art_type: (await query(t, 'SELECT * FROM art_type ORDER BY id')).map((r) => JSON.stringify(r)),
    image_type: (await query(t, 'SELECT * FROM image_type ORDER BY mime_type')).map((r) => JSON.stringify(r)),
  });

  before(async () => {
    t = await makeTestEnv();
    // A catalogue to protect: a first import and a release of sleeve's own.
    await cliOk(t.env, ['import', 'musicbrainz', await fresh()]);
    await cliOk(t.env, ['release', 'add', newMbid(), '--release-group', newMbid(), '--title', 'mine']);
    baseline = await state();
    assert.equal(baseline.release?.length, 8);
    assert.equal(baseline.cover_art?.length, 9);
  });

  after(async () => {
    await t?.cleanup();
  });

  for (const c of CASES) {
    it(`${c.name}: reported with file, line and row; nothing changed`, async () => {
      const dir = await fresh();
      await corrupt(dir, c.file, c.line, c.with);
      const r = await runCli(t.env, ['import', 'musicbrainz', dir]);
      assertRefused(r, c.message);
      const line = c.message.source.startsWith('line ') ? '' : `mbdump/${c.file} line ${c.line}: `;
      if (line !== '') assert.ok(r.stderr.includes(line), `expected "${line}" in:\n${r.stderr}`);
      assert.match(r.stderr, /\n {2}row: /);
      assert.match(r.stderr, /Nothing was changed in sleeve's catalogue/);
      assert.match(r.stderr, /--skip-malformed/);
      assert.deepEqual(await state(), baseline);
    });
  }

  it('--json gives the error as JSON on stdout', async () => {
    const dir = await fresh();
    await corrupt(dir, 'release', 2, (old) => replaceField(old, 0, 'two'));
    const r = await runCli(t.env, ['--json', 'import', 'musicbrainz', dir]);
    assert.equal(r.code, 2);
    const out = JSON.parse(r.stdout);
    assert.equal(out.error.code, 'INVALID_INPUT');
    assert.match(out.error.message, /^mbdump\/release line 2: column id is not an integer: "two"/);
  });

  it('refuses a directory without the dump files, naming them and their tarball', async () => {
    const dir = await fresh();
    await rm(path.join(dir, 'mbdump', 'release'));
    await rm(path.join(dir, 'mbdump', 'cover_art_archive.cover_art'));
    const r = await runCli(t.env, ['import', 'musicbrainz', dir]);
    assertRefused(r, /lacks mbdump\/release, mbdump\/cover_art_archive\.cover_art; extract mbdump\.tar\.bz2 and mbdump-cover-art-archive\.tar\.bz2/);
    assertRefused(await runCli(t.env, ['import', 'musicbrainz', path.join(t.dir, 'nowhere')]), /nowhere: no such directory/);
    assertRefused(await runCli(t.env, ['import', 'musicbrainz', path.join(dir, 'TIMESTAMP')]), /is not a directory/);
    assertRefused(await runCli(t.env, ['import', 'musicbrainz']), /usage: sleeve import musicbrainz DIR/);
    assertRefused(await runCli(t.env, ['import', 'musicbrainz', dir, '--batch-rows', '0']), /--batch-rows must be a whole number/);
    assert.deepEqual(await state(), baseline);
  });

  it('refuses a dump without releases rather than removing every imported release', async () => {
    const dir = await fresh((tables) => {
      tables.release = [];
    });
    assertRefused(await runCli(t.env, ['import', 'musicbrainz', dir]), /mbdump\/release holds no rows; refusing/);
    assert.deepEqual(await state(), baseline);
  });

  it('--skip-malformed skips and counts such rows, lists the first, and applies the rest', async () => {
    const dir = await fresh();
    await corrupt(dir, 'release', 3, (old) => old.slice(0, old.lastIndexOf('\t')));
    await corrupt(dir, 'cover_art_archive.cover_art', 9, (old) => replaceField(old, 4, 'x'));
    // Refused first (what was staged stays), then the same dump with the flag resumes.
    assertRefused(await runCli(t.env, ['import', 'musicbrainz', dir]), /mbdump\/release line 3/);
    const summary = await cliOk(t.env, ['--json', 'import', 'musicbrainz', dir, '--skip-malformed']);
    assert.equal(summary.resumed, true);
    assert.equal(summary.files.find((f: any) => f.file === 'release_group').already_staged, true);
    assert.equal(summary.rows_skipped, 2);
    assert.deepEqual(
      summary.skipped_rows.map((r: any) => [r.file, r.line, r.reason.split(' (')[0]]),
      [
        ['mbdump/release', 3, '13 columns where 14 were expected'],
        ['mbdump/cover_art_archive.cover_art', 9, 'column ordering is not an integer: "x"'],
      ],
    );
    assert.match(summary.skipped_rows[0].row, /^3⇥a0a0a0a0-1111-4111-8111-000000000003⇥Three⇥/);
    // R.three's row was skipped, so its image points at a release the dump lacks: left out, counted.
    assert.deepEqual(summary.applied.omitted['cover_art: release not in the dump'], { count: 1, examples: [`${IMAGES.r3Back} (release 3)`] });
    assert.deepEqual(summary.applied.omitted['cover_art_type: image not in the dump (or left out)'].count, 2);
    assert.equal((await query(t, 'SELECT id FROM release WHERE gid = ?', [R.three])).length, 0);
    assert.equal((await query(t, 'SELECT id FROM cover_art WHERE id = ?', [IMAGES.r7Front])).length, 0);
    const [run] = await query(t, `SELECT status, rows_skipped FROM import_run ORDER BY id DESC LIMIT 1`);
    assert.deepEqual([run?.status, Number(run?.rows_skipped)], ['succeeded', 2]);
    const failed = await query(t, `SELECT status, message FROM import_run WHERE status = 'failed' ORDER BY id`);
    assert.ok(failed.length >= CASES.length);
    assert.match(String(failed.at(-1)?.message), /mbdump\/release line 3/);
  });

  it('leaves out and counts rows that point at what the dump lacks', async () => {
    const dir = await fresh((tables) => {
      const push = (file: string, row: Value[]) => (tables[file] as Value[][]).push(row);
      push('cover_art_archive.cover_art', [9101, 99, '', 1, 1, '2012-01-26 00:54:05+00', 0, 'image/jpeg', null, null, null, null]);
      push('cover_art_archive.cover_art', [9102, 4, '', 1, 2, '2012-01-26 00:54:05+00', 0, 'image/webp', null, null, null, null]);
      push('cover_art_archive.cover_art_type', [9999, 1]);
      push('cover_art_archive.cover_art_type', [IMAGES.r4Front, 999]);
      push('release', [50, newMbid(), 'orphan', 1, 77, null, null, null, null, null, '', 0, -1, null]);
      push('release_gid_redirect', [newMbid(), 404, null]);
      push('cover_art_archive.release_group_cover_art', [1, 4]);
      push('release_country', [404, 221, 2000, null, null]);
      push('release_group', [2, newMbid(), 'same id again', 1, null, '', 0, null]);
    });
    const summary = await cliOk(t.env, ['--json', 'import', 'musicbrainz', dir]);
    const counts = Object.fromEntries(Object.entries(summary.applied.omitted).map(([k, v]: [string, any]) => [k, v.count]));
    assert.deepEqual(counts, {
      'release_group: repeated key (first row kept)': 1,
      'release: release group not in the dump': 1,
      'release_country/release_unknown_country: release not in the dump': 1,
      'release_gid_redirect: target not in the dump': 1,
      'cover_art: release not in the dump': 1,
      'cover_art: unknown mime type': 1,
      'cover_art_type: image not in the dump (or left out)': 1,
      'cover_art_type: unknown art type': 1,
      'release_group_cover_art: release not in the dump or not in that group': 1,
    });
    assert.deepEqual(summary.applied.omitted['cover_art: release not in the dump'].examples, ['9101 (release 99)']);
    assert.deepEqual((await query(t, 'SELECT count(*) AS n FROM cover_art WHERE id IN (9101, 9102)')).map((r) => Number(r.n)), [0]);
  });
});
