/*
 * Interrupted imports: a killed import resumes where its last committed chunk ended
 * (it does not start over) and ends exactly like an uninterrupted one; SIGTERM stops
 * at a chunk boundary and says how to resume; a second import at the same time is
 * refused. A later dump imported over an earlier one ends like a fresh import of it.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliOk, DIALECT, makeTestEnv, runCli, type TestEnv } from '../helpers/env.js';
import { generateDump, type GeneratedDump } from '../../datagen/mbdump.js';
import { dbDump, spawnCli } from '../cover-art/cli-support.js';
import { query } from './support.js';
import { loadConfig } from '../../src/config/load.js';

// Large enough for 25 chunks of the release file, so that a kill lands between chunks.
const RELEASES = 10_000;
const IMAGES = 20_000;
const CHUNK = 400;
const BATCH = ['--batch-rows', String(CHUNK)];

/** Spawns an import and resolves once its stderr matches `pattern` (the child keeps running). */
function importUntil(env: Record<string, string>, dir: string, pattern: RegExp, batch: string[] = BATCH) {
  const run = spawnCli(env, ['import', 'musicbrainz', dir, ...batch]);
  let seen = '';
  const reached = new Promise<void>((resolve, reject) => {
    run.child.stderr?.on('data', (c: Buffer) => {
      seen += c.toString();
      if (pattern.test(seen)) resolve();
    });
    run.done.then((r) => reject(new Error(`the import ended before ${pattern}: exit ${r.code}\n${r.stderr}`)), reject);
  });
  return { ...run, reached };
}

/** How far staging has got with a file: lines committed, and whether it is done (undefined before it starts). */
async function stagedSoFar(t: TestEnv, file: string): Promise<{ lines: number; done: boolean } | undefined> {
  const cfg = loadConfig(t.env).database;
  try {
    if (cfg.kind === 'sqlite') {
      const { default: Sqlite } = await import('better-sqlite3');
      const db = new Sqlite(`${cfg.file}.import-staging`, { fileMustExist: true });
      try {
        db.pragma('busy_timeout = 1000');
        const row = db.prepare('SELECT lines_done, done FROM progress WHERE file = ?').get(file) as { lines_done: number; done: number } | undefined;
        return row === undefined ? undefined : { lines: row.lines_done, done: row.done === 1 };
      } finally {
        db.close();
      }
    }
    const rows = await query(t, 'SELECT lines_done, done FROM import_mb_progress WHERE file = ?', [file]);
    return rows[0] === undefined ? undefined : { lines: Number(rows[0].lines_done), done: rows[0].done === true };
  } catch {
    return undefined; // not created yet
  }
}

async function state(t: TestEnv): Promise<Record<string, string[]>> {
  return { ...(await dbDump(t)), art_type: (await query(t, 'SELECT * FROM art_type ORDER BY id')).map((r) => JSON.stringify(r)) };
}

describe(`sleeve import musicbrainz: interrupted and repeated imports (${DIALECT})`, () => {
  let work: string;
  let v1: GeneratedDump;
  let v2: GeneratedDump;
  let reference: TestEnv;
  let referenceState: Record<string, string[]>;
  const envs: TestEnv[] = [];
  const env = async () => {
    const t = await makeTestEnv();
    envs.push(t);
    return t;
  };

  before(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'sleeve-mbdump-'));
    v1 = await generateDump(path.join(work, 'v1'), { releases: RELEASES, images: IMAGES, edits: true });
    v2 = await generateDump(path.join(work, 'v2'), { releases: RELEASES, images: IMAGES, edits: true, variant: 2 });
    reference = await env();
    const summary = await cliOk(reference.env, ['--json', 'import', 'musicbrainz', v1.dir, ...BATCH]);
    assert.equal(summary.rows_read, v1.total);
    assert.deepEqual(summary.applied.omitted, {});
    referenceState = await state(reference);
    assert.equal(referenceState.release?.length, RELEASES);
  });

  after(async () => {
    for (const t of envs) await t.cleanup();
    if (work !== undefined) await rm(work, { recursive: true, force: true });
  });

  it('resumes a killed import from its last committed chunk and ends as an uninterrupted import', async () => {
    const t = await env();
    const first = importUntil(t.env, v1.dir, /mbdump\/release_group: /);
    await first.reached;
    // Once some chunks of the release file are committed, kill it without warning.
    for (let i = 0; i < 500; i++) {
      const p = await stagedSoFar(t, 'release');
      if (p !== undefined && (p.lines > 0 || p.done)) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    first.child.kill('SIGKILL');
    const killed = await first.done;
    assert.equal(killed.signal, 'SIGKILL');
    await assertUntouched(t);

    const second = await cliOk(t.env, ['--json', 'import', 'musicbrainz', v1.dir, ...BATCH]);
    assert.equal(second.resumed, true);
    const staged = second.files.filter((f: any) => f.already_staged === true).map((f: any) => f.file);
    assert.ok(staged.includes('release_group'), `already staged: ${staged.join(', ')}`);
    // The file being read when it was killed goes on from the line after its last committed chunk.
    const midway = second.files.filter((f: any) => f.resumed_from_line > 1);
    assert.equal(midway.length, 1, JSON.stringify(second.files));
    const [m] = midway;
    assert.equal((m.resumed_from_line - 1) % CHUNK, 0);
    assert.ok(m.resumed_from_byte > 0 && m.rows === v1.rows[m.file]! - (m.resumed_from_line - 1), JSON.stringify(m));
    // It read only what was left: less than the whole dump.
    assert.ok(second.rows_read < v1.total - v1.rows.release_group!, `${second.rows_read} of ${v1.total}`);
    assert.deepEqual(await state(t), referenceState);
    const runs = await query(t, 'SELECT status FROM import_run ORDER BY id');
    assert.deepEqual(runs.map((r) => r.status), ['interrupted', 'succeeded']);
  });

  it('stops at a chunk boundary on SIGTERM, says how to resume, and refuses a second import meanwhile', async () => {
    const t = await env();
    // Small chunks keep this import running for a while, so the second one surely finds it running.
    const first = importUntil(t.env, v1.dir, /mbdump\/release_group: /, ['--batch-rows', '20']);
    await first.reached;
    const other = await runCli(t.env, ['import', 'musicbrainz', v1.dir]);
    assert.equal(other.code, 2, other.stderr);
    assert.match(other.stderr, /another "sleeve import musicbrainz" is running on this database/);
    first.child.kill('SIGTERM');
    const stopped = await first.done;
    assert.equal(stopped.code, 143, stopped.stderr);
    assert.match(stopped.stderr, /SIGTERM: stopping at the next chunk boundary/);
    assert.match(stopped.stderr, /import stopped (at mbdump\/\S+ line \d+|after mbdump\/\S+|before the changes were applied)\. Nothing was changed in sleeve's catalogue; what was staged is kept\. Run the same command again to resume\./);
    await assertUntouched(t);

    const second = await cliOk(t.env, ['--json', 'import', 'musicbrainz', v1.dir, ...BATCH]);
    assert.equal(second.resumed, true);
    assert.ok(second.rows_read < v1.total);
    assert.deepEqual(await state(t), referenceState);
    const runs = await query(t, 'SELECT status FROM import_run ORDER BY id');
    assert.deepEqual(runs.map((r) => r.status), ['interrupted', 'succeeded']);
  });

  it('--restart reads everything again', async () => {
    const t = await env();
    const first = importUntil(t.env, v1.dir, /mbdump\/release_group: /);
    await first.reached;
    first.child.kill('SIGKILL');
    await first.done;
    const again = await cliOk(t.env, ['--json', 'import', 'musicbrainz', v1.dir, '--restart']);
    assert.equal(again.resumed, false);
    assert.equal(again.rows_read, v1.total);
    assert.deepEqual(await state(t), referenceState);
  });

  it('brings a mirror of an earlier dump to a later one: equal to a fresh import of the later dump', async () => {
    const summary = await cliOk(reference.env, ['--json', 'import', 'musicbrainz', v2.dir]);
    const a = summary.applied;
    for (const entity of ['release', 'cover_art']) {
      assert.ok(a[entity].added > 0 && a[entity].changed > 0 && a[entity].removed > 0, `${entity}: ${JSON.stringify(a[entity])}`);
    }
    assert.ok(a.release_gid_redirect.removed > 0 && a.release_group_cover_art.changed > 0, JSON.stringify(a));
    const fresh = await env();
    await cliOk(fresh.env, ['import', 'musicbrainz', v2.dir]);
    const [upgraded, direct] = [await state(reference), await state(fresh)];
    // The counters differ by history (catalogue versions; the highest image id ever imported).
    delete upgraded.counter;
    delete direct.counter;
    assert.deepEqual(upgraded, direct);
  });
});

/** Nothing applied: the catalogue as the migrations left it. */
async function assertUntouched(t: TestEnv): Promise<void> {
  const s = await state(t);
  for (const [table, rows] of Object.entries(s)) {
    if (table === 'counter' || table === 'art_type') continue;
    assert.deepEqual(rows, [], `${table} is not empty`);
  }
  const counters = await query(t, 'SELECT name, value FROM counter ORDER BY name');
  // Every counter as a new database has it (the catalogue's and the metrics').
  assert.deepEqual(
    counters.map((r) => [r.name, Number(r.value)]),
    [
      ...['catalogue_published', 'catalogue_version', 'cover_art_id'].map((name) => [name, 0]),
      // sleeve's own edit ids start above every MusicBrainz edit id (docs/decisions.md).
      ['edit_id', 1_000_000_000],
      ...['image_removals_total', 'images', 'listing_refreshed', 'releases', 'upload_bytes_total', 'uploads_total'].map((name) => [name, 0]),
    ],
  );
  // The dump's art types differ from the seeded ones (descriptions, Panel's gid).
  const [panel] = await query(t, 'SELECT gid FROM art_type WHERE id = 81');
  assert.equal(panel?.gid, null);
}
