import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { StatMemo } from '../../src/storage/stat-memo.js';

const st = statSync(fileURLToPath(import.meta.url));

describe('StatMemo', () => {
  it('tells apart keys that share a row: only the one remembered last is found there', () => {
    // One row: every key shares it.
    const memo = new StatMemo(1);
    memo.remember('mbid-a/mbid-a-1.jpg', st);
    const row = memo.find('mbid-a/mbid-a-1.jpg');
    assert.ok(row >= 0);
    assert.equal(memo.size(row), st.size);
    assert.equal(memo.ino(row), st.ino);
    assert.equal(memo.mtimeMs(row), st.mtimeMs);
    assert.equal(memo.find('mbid-a/mbid-a-2.jpg'), -1, 'another key, its check differs');
    memo.remember('mbid-a/mbid-a-2.jpg', st);
    assert.ok(memo.find('mbid-a/mbid-a-2.jpg') >= 0);
    assert.equal(memo.find('mbid-a/mbid-a-1.jpg'), -1, 'the row was taken');
    memo.forget('mbid-a/mbid-a-1.jpg');
    assert.ok(memo.find('mbid-a/mbid-a-2.jpg') >= 0, 'forgetting a key not there leaves the row');
    memo.forget('mbid-a/mbid-a-2.jpg');
    assert.equal(memo.find('mbid-a/mbid-a-2.jpg'), -1);
  });

  it('forgets everything at clear, and remembers again after it', () => {
    const memo = new StatMemo(64);
    const keys = Array.from({ length: 40 }, (_, i) => `mbid-b/mbid-b-${i}_thumb250.jpg`);
    for (const k of keys) memo.remember(k, st);
    const found = keys.filter((k) => memo.find(k) >= 0).length;
    assert.ok(found >= 20, `${found} of 40 in 64 rows`);
    memo.clear();
    for (const k of keys) assert.equal(memo.find(k), -1, k);
    memo.remember(keys[0] as string, st);
    assert.ok(memo.find(keys[0] as string) >= 0);
    // Past the last generation the table is zeroed and the count starts again.
    for (let i = 0; i < 2 ** 20; i++) memo.clear();
    assert.equal(memo.find(keys[0] as string), -1);
    memo.remember(keys[1] as string, st);
    assert.ok(memo.find(keys[1] as string) >= 0);
  });

  it('does not remember a file whose inode is past what a double holds exactly', () => {
    const memo = new StatMemo(4);
    memo.remember('mbid-c/mbid-c-1.jpg', { ...st, ino: 2 ** 60 } as typeof st);
    assert.equal(memo.find('mbid-c/mbid-c-1.jpg'), -1);
  });
});
