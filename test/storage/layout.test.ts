/*
 * The layout's content types and cache lifetimes by a key's suffix (src/storage/object-store.ts):
 * the suffixes of the layout only, not whatever an object happens to have as a property.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { layoutCacheControl, layoutContentType } from '../../src/storage/object-store.js';

const MBID = '5eefe000-0000-4000-8000-000000000001';

describe("the layout's suffixes", () => {
  it('give each file of the layout its content type and cache lifetime', () => {
    const cases: [string, string, string][] = [
      [`mbid-${MBID}/mbid-${MBID}-1.jpg`, 'image/jpeg', 'public, max-age=31536000, immutable'],
      [`mbid-${MBID}/mbid-${MBID}-1_thumb250.jpg`, 'image/jpeg', 'public, max-age=31536000, immutable'],
      [`mbid-${MBID}/mbid-${MBID}-1.png`, 'image/png', 'public, max-age=31536000, immutable'],
      [`mbid-${MBID}/mbid-${MBID}-1.gif`, 'image/gif', 'public, max-age=31536000, immutable'],
      [`mbid-${MBID}/mbid-${MBID}-1.pdf`, 'application/pdf', 'public, max-age=31536000, immutable'],
      [`mbid-${MBID}/index.json`, 'application/json', 'public, no-cache'],
    ];
    for (const [key, type, cacheControl] of cases) {
      assert.equal(layoutContentType(key), type, key);
      assert.equal(layoutCacheControl(key), cacheControl, key);
    }
  });

  it('give nothing for another suffix, one an object has as a property included', () => {
    for (const suffix of ['txt', 'jpeg', 'JPG', 'constructor', 'toString', '__proto__', 'hasOwnProperty', '']) {
      const key = `mbid-${MBID}/x.${suffix}`;
      assert.equal(layoutContentType(key), undefined, key);
      assert.equal(layoutCacheControl(key), undefined, key);
    }
  });
});
