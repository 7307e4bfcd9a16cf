import sharp from 'sharp';

export const SIZES = [250, 500, 1200] as const;
export const QUALITY = 85;

/**
 * The three CAA thumbnails made "the plain way" with sharp alone: one pipeline per size
 * straight from the original (longest side, aspect kept, never upscaled), all three in
 * flight at once.
 */
export function plainThumbnails(bytes: Buffer): Promise<Buffer[]> {
  return Promise.all(
    SIZES.map((size) => sharp(bytes).resize(size, size, { fit: 'inside', withoutEnlargement: true }).jpeg({ quality: QUALITY }).toBuffer()),
  );
}
