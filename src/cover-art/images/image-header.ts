/*
 * The format and stored size of a JPEG, PNG or GIF read from its first bytes in plain code:
 * what the bulk mirror checks of a file whose md5 the upstream's `_files.xml` vouches for
 * (cover-art/images/thumbnails.ts, verifyImage without a decode). Reading it through sharp cost a
 * trip through libuv's thread pool and about 0.4 ms of the one core per file
 * (docs/decisions.md, "Bulk mirror speed"). Anything this does not recognise is left to sharp.
 */

export interface ImageHeader {
  format: 'jpeg' | 'png' | 'gif';
  /** As stored: a JPEG's EXIF orientation is not applied (the pixel count is the same either way). */
  width: number;
  height: number;
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** The header's facts, or undefined when the bytes do not start as a well-formed JPEG, PNG or GIF with a size. */
export function readImageHeader(bytes: Buffer): ImageHeader | undefined {
  const found = bytes[0] === 0xff && bytes[1] === 0xd8 ? jpeg(bytes) : bytes.subarray(0, 8).equals(PNG_SIGNATURE) ? png(bytes) : gif(bytes);
  return found !== undefined && found.width > 0 && found.height > 0 ? found : undefined;
}

function png(b: Buffer): ImageHeader | undefined {
  // The first chunk is IHDR, 13 bytes long: width and height, big-endian.
  if (b.length < 33 || b.readUInt32BE(8) !== 13 || b.toString('latin1', 12, 16) !== 'IHDR') return undefined;
  return { format: 'png', width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

function gif(b: Buffer): ImageHeader | undefined {
  const magic = b.toString('latin1', 0, 6);
  if (b.length < 13 || (magic !== 'GIF87a' && magic !== 'GIF89a')) return undefined;
  return { format: 'gif', width: b.readUInt16LE(6), height: b.readUInt16LE(8) };
}

/** Walks the markers from SOI to the first frame header (SOF0–SOF15 but DHT, JPG and DAC); none before the scan: undefined. */
function jpeg(b: Buffer): ImageHeader | undefined {
  let at = 2;
  while (at + 4 <= b.length) {
    if (b[at] !== 0xff) return undefined;
    const marker = b[at + 1] as number;
    if (marker === 0xff) {
      at++; // fill byte
      continue;
    }
    // Markers without a length: TEM and RST0–7 (not expected here, skipped as libjpeg does).
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      at += 2;
      continue;
    }
    if (marker === 0xd8 || marker === 0xd9 || marker === 0xda) return undefined; // SOI again, EOI or the scan before a frame
    const length = b.readUInt16BE(at + 2);
    if (length < 2 || at + 2 + length > b.length) return undefined;
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      if (length < 8) return undefined;
      return { format: 'jpeg', height: b.readUInt16BE(at + 5), width: b.readUInt16BE(at + 7) };
    }
    at += 2 + length;
  }
  return undefined;
}
