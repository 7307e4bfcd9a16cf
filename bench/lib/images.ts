import sharp from 'sharp';

/**
 * A deterministic high-entropy JPEG: smooth gradients and ripples (so the picture has
 * structure a resize must keep) with strong per-pixel noise on every channel (so it
 * does not compress away). 3000×3000 at q90 comes to about 5.3 MiB.
 */
export async function makeNoisyJpeg(width: number, height: number, quality = 90): Promise<Buffer> {
  const buf = Buffer.alloc(width * height * 3);
  let s = (width * 73856093) ^ (height * 19349663) ^ 0x9e3779b9;
  const clamp = (v: number) => (v < 0 ? 0 : v > 255 ? 255 : v);
  for (let y = 0; y < height; y++) {
    const ripple = Math.sin(y / 37) * 40;
    for (let x = 0; x < width; x++) {
      s ^= s << 13;
      s ^= s >>> 17;
      s ^= s << 5;
      const i = (y * width + x) * 3;
      const base = Math.sin((x + y) / 53) * 40 + ripple;
      buf[i] = clamp((x * 200) / width + base + ((s & 0x7f) - 64));
      buf[i + 1] = clamp((y * 200) / height - base + (((s >>> 8) & 0x7f) - 64));
      buf[i + 2] = clamp(128 + base + (((s >>> 16) & 0x7f) - 64));
    }
  }
  return sharp(buf, { raw: { width, height, channels: 3 } }).jpeg({ quality }).toBuffer();
}
