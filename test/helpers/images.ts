import sharp from 'sharp';

/** A real JPEG with some detail (gradient and noise), width × height. */
export async function makeJpeg(width: number, height: number, quality = 90): Promise<Buffer> {
  return sharp(await pattern(width, height, 3), { raw: { width, height, channels: 3 } }).jpeg({ quality }).toBuffer();
}

export async function makePng(width: number, height: number, alpha = false): Promise<Buffer> {
  const channels = alpha ? 4 : 3;
  return sharp(await pattern(width, height, channels), { raw: { width, height, channels } }).png().toBuffer();
}

export async function makeGif(width: number, height: number): Promise<Buffer> {
  return sharp(await pattern(width, height, 3), { raw: { width, height, channels: 3 } }).gif().toBuffer();
}

export async function makeWebp(width: number, height: number): Promise<Buffer> {
  return sharp(await pattern(width, height, 3), { raw: { width, height, channels: 3 } }).webp().toBuffer();
}

async function pattern(width: number, height: number, channels: number): Promise<Buffer> {
  const buf = Buffer.alloc(width * height * channels);
  let seed = width * 31 + height;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      const i = (y * width + x) * channels;
      buf[i] = (x * 255) / width;
      buf[i + 1] = (y * 255) / height;
      buf[i + 2] = seed & 0xff;
      if (channels === 4) buf[i + 3] = x < width / 2 ? 128 : 255;
    }
  }
  return buf;
}

export async function dimensions(bytes: Buffer): Promise<{ format: string | undefined; width: number | undefined; height: number | undefined }> {
  const m = await sharp(bytes).metadata();
  return { format: m.format, width: m.width, height: m.height };
}
