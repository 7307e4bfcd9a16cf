import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { readImageHeader } from '../../src/cover-art/images/image-header.js';
import { verifyImage } from '../../src/cover-art/images/thumbnails.js';

/*
 * The header the bulk mirror reads in plain code for files whose md5 the upstream vouches for
 * (docs/decisions.md, "Bulk mirror speed"): the same format and stored size as sharp reads, and
 * nothing (left to sharp) for what is not a well-formed start of a JPEG, PNG or GIF.
 */

function raw(width: number, height: number) {
  return sharp({ create: { width, height, channels: 3, background: { r: 200, g: 40, b: 90 } } });
}

const CASES: [string, () => Promise<Buffer>, 'jpeg' | 'png' | 'gif', number, number][] = [
  ['baseline JPEG', () => raw(321, 123).jpeg().toBuffer(), 'jpeg', 321, 123],
  ['progressive JPEG', () => raw(64, 640).jpeg({ progressive: true }).toBuffer(), 'jpeg', 64, 640],
  ['JPEG with EXIF orientation 6 (stored 400×200)', async () => sharp(await raw(400, 200).jpeg().toBuffer()).withMetadata({ orientation: 6 }).jpeg().toBuffer(), 'jpeg', 400, 200],
  ['PNG', () => raw(70, 3).png().toBuffer(), 'png', 70, 3],
  ['GIF', () => raw(9, 300).gif().toBuffer(), 'gif', 9, 300],
];

describe('readImageHeader', () => {
  for (const [name, make, format, width, height] of CASES) {
    it(`reads the format and stored size of a ${name} as sharp does`, async () => {
      const bytes = await make();
      const meta = await sharp(bytes).metadata();
      assert.deepEqual(readImageHeader(bytes), { format, width, height });
      assert.equal(meta.format, format);
      assert.equal(meta.width, width);
      assert.equal(meta.height, height);
    });
  }

  it('finds nothing in bytes cut before the frame header, in other formats, or in a scan before any frame', async () => {
    const jpeg = await raw(50, 40).withMetadata({ orientation: 3 }).jpeg().toBuffer();
    // Cut just before the SOF marker: the header is not all there.
    const sof = jpeg.indexOf(Buffer.from([0xff, 0xc0]));
    assert.ok(sof > 2);
    assert.equal(readImageHeader(jpeg.subarray(0, sof + 4)), undefined);
    assert.equal(readImageHeader(Buffer.from([0xff, 0xd8, 0xff, 0xda, 0x00, 0x08, 1, 2, 3, 4, 5, 6])), undefined);
    assert.equal(readImageHeader(Buffer.from('%PDF-1.4\n')), undefined);
    assert.equal(readImageHeader(Buffer.from('<html>not an image</html>')), undefined);
    assert.equal(readImageHeader((await raw(10, 10).png().toBuffer()).subarray(0, 20)), undefined);
    assert.equal(readImageHeader(Buffer.from('GIF89a\x00\x00\x05\x00\x00\x00\x00', 'latin1')), undefined, 'a width of 0');
    assert.equal(readImageHeader(await raw(10, 10).webp().toBuffer()), undefined);
  });

  it('leaves to verifyImage without a decode what it cannot read, with sharp words and the pixel limit', async () => {
    const png = await raw(100, 100).png().toBuffer();
    assert.deepEqual(await verifyImage(png, 10_000, false), { mime: 'image/png', suffix: 'png', width: 100, height: 100 });
    await assert.rejects(verifyImage(png, 9_999, false), /exceeds the limit of 9999 pixels/);
    await assert.rejects(verifyImage(Buffer.from('<html>not an image</html>'), 10_000, false), /not an image sleeve can read/);
    await assert.rejects(verifyImage(await raw(10, 10).webp().toBuffer(), 10_000, false), /unsupported image format webp/);
  });
});
