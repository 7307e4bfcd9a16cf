/*
 * The file cache's memory of the catalogue's answers (FileCache.answer): what lets a file
 * pushed out and let in again cost no second question, and what keeps an answer from
 * outliving the catalogue change that could make it wrong.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { catalogueKeeps, catalogueKeepsNow, FileCache } from '../../src/cover-art/files/file-cache.js';
import { FileServer } from '../../src/cover-art/files/file-server.js';
import { openRuntime, type Runtime } from '../../src/runtime.js';
import { FsObjectStore } from '../../src/storage/index.js';
import { cliInProcess, DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { newMbid, writeInput } from './cli-support.js';

const KEY = 'mbid-0c1d2e3f-0000-4000-8000-000000000001/mbid-0c1d2e3f-0000-4000-8000-000000000001-1_thumb250.jpg';

describe('the file cache remembers the catalogue', () => {
  it('answers what the catalogue said in this generation, a no as well as a yes', () => {
    const cache = new FileCache(1 << 20);
    assert.equal(cache.answered(KEY), undefined);
    cache.answer(KEY, true, cache.generation);
    cache.answer('other', false, cache.generation);
    assert.equal(cache.answered(KEY), true);
    assert.equal(cache.answered('other'), false);
  });

  it('forgets every answer when the catalogue changes', () => {
    const cache = new FileCache(1 << 20);
    cache.answer(KEY, true, cache.generation);
    cache.clear();
    assert.equal(cache.answered(KEY), undefined);
  });

  it('does not remember an answer asked before a change it heard of while waiting', () => {
    const cache = new FileCache(1 << 20);
    const asked = cache.generation;
    cache.clear();
    cache.answer(KEY, true, asked);
    assert.equal(cache.answered(KEY), undefined);
  });

  it('is bounded: past its limit it starts again', () => {
    const cache = new FileCache(1 << 20);
    // 1 MiB of budget: the floor of 4,096 answers.
    for (let i = 0; i < 4096; i++) cache.answer(`k${i}`, true, cache.generation);
    assert.equal(cache.answered('k0'), true);
    cache.answer('one more', true, cache.generation);
    assert.equal(cache.answered('k0'), undefined);
    assert.equal(cache.answered('one more'), true);
  });
});

describe(`the catalogue's answers (${DIALECT})`, () => {
  let t: TestEnv;
  let rt: Runtime;
  const R1 = newMbid();
  const R2 = newMbid();
  const EMPTY = newMbid();
  let id1 = '';
  let id2 = '';
  const thumb = (mbid: string, id: string) => `mbid-${mbid}/mbid-${mbid}-${id}_thumb250.jpg`;
  const index = (mbid: string) => `mbid-${mbid}/index.json`;

  before(async () => {
    t = await makeTestEnv();
    const jpeg = await writeInput(t, 'a.jpg', await makeJpeg(300, 300));
    for (const r of [R1, R2]) await cliInProcess(t.env, ['release', 'add', r, '--release-group', newMbid(), '--title', r]);
    id1 = String((await cliInProcess(t.env, ['--json', 'art', 'add', R1, jpeg])).id);
    id2 = String((await cliInProcess(t.env, ['--json', 'art', 'add', R2, jpeg])).id);
    rt = await openRuntime(loadConfig(t.env));
  });

  after(async () => {
    await rt?.close();
    await t?.cleanup();
  });

  /** What the catalogue answers for each key once R2's listing is marked to be rewritten. */
  function expectedKeeps(): Record<string, boolean> {
    return {
      [thumb(R1, id1)]: true,
      [thumb(R2, id2)]: true,
      // An image id under another release's name, an id no image has, a release the catalogue lacks.
      [thumb(R1, id2)]: false,
      [thumb(R1, '999999')]: false,
      [thumb(EMPTY, id1)]: false,
      [index(R1)]: true,
      [index(R2)]: false,
      [index(EMPTY)]: false,
    };
  }

  it('answers each key for itself: named images and clean listings yes, the rest no', async () => {
    const keeps = catalogueKeeps(rt.database.db);
    // The listing of R2 is marked to be rewritten: not kept until it is.
    await rt.database.db.updateTable('release').set({ index_dirty: 1 }).where('gid', '=', R2).execute();
    const asked = expectedKeeps();
    // Asked at once, the same key twice too.
    const answers = await Promise.all([...Object.keys(asked), thumb(R1, id1)].map((k) => keeps(k)));
    assert.deepEqual(answers, [...Object.values(asked), true]);
  });

  it('asks the same on the calling thread where the catalogue is a SQLite file, seeing each change once committed', async () => {
    const reads = rt.database.readsNow;
    if (DIALECT === 'postgres') {
      assert.equal(reads, undefined, 'PostgreSQL has no read on the calling thread');
      return;
    }
    assert.ok(reads !== undefined);
    const now = catalogueKeepsNow(rt.database.db, reads);
    await rt.database.db.updateTable('release').set({ index_dirty: 1 }).where('gid', '=', R2).execute();
    const asked = expectedKeeps();
    assert.deepEqual(
      Object.keys(asked).map((k) => now(k)),
      Object.values(asked),
    );
    // The listing rewritten (committed by the writing connection): the read-only connection sees it.
    await rt.database.db.updateTable('release').set({ index_dirty: 0 }).where('gid', '=', R2).execute();
    assert.equal(now(index(R2)), true);
    // Not while a transaction of the writing connection is still open: only once it commits.
    await rt.database.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('cover_art').where('id', '=', Number(id2)).execute();
      assert.equal(now(thumb(R2, id2)), true, 'the delete is not committed yet');
    });
    assert.equal(now(thumb(R2, id2)), false);
  });
});

describe('the file server asks the catalogue on its thread where it can', () => {
  it('asks the awaited way when the question on the thread cannot be answered now, and keeps the file on its yes', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'sleeve-keeps-now-'));
    const bytes = Buffer.from('not really a jpeg, but a file of the layout');
    await mkdir(path.join(root, path.dirname(KEY)), { recursive: true });
    await writeFile(path.join(root, KEY), bytes);
    const cache = new FileCache(1 << 20);
    const asked = { now: 0, awaited: 0 };
    const files = new FileServer({
      store: new FsObjectStore(root, { reads: 'inline' }),
      cache,
      keeps: async () => {
        asked.awaited++;
        return true;
      },
      keepsNow: () => {
        asked.now++;
        throw new Error('database is locked');
      },
    });
    const server = http.createServer((req, res) => files.answer(req, res, 'test', { warn: () => {}, error: () => {} }));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const address = server.address() as { port: number };
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`http://127.0.0.1:${address.port}/download/${KEY}`);
        assert.equal(res.status, 200);
        assert.deepEqual(Buffer.from(await res.arrayBuffer()), bytes);
      }
      // Asked once each way (the second request a hit), the awaited yes remembered, the file kept.
      assert.deepEqual(asked, { now: 1, awaited: 1 });
      assert.equal(cache.answered(KEY), true);
      assert.equal(cache.size, 1);
    } finally {
      await new Promise((resolve) => server.close(resolve));
      await rm(root, { recursive: true, force: true });
    }
  });
});
