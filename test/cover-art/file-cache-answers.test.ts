/*
 * The file cache's memory of the catalogue's answers (FileCache.answer): what lets a file
 * pushed out and let in again cost no second question, and what keeps an answer from
 * outliving the catalogue change that could make it wrong.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FileCache } from '../../src/cover-art/file-cache.js';

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
