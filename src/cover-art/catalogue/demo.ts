import { escapeHtml } from '../../shared/html.js';
import { addArt, addRelease, setGroupCover } from './catalogue.js';
import type { CoverArtDeps } from '../deps.js';
import { findRelease } from './repo.js';
import { renderSvgToJpeg } from '../images/thumbnails.js';

interface DemoImage {
  types: string[];
  comment: string;
  hue: number;
  pattern: 'rings' | 'bars' | 'grid';
}

interface DemoRelease {
  mbid: string;
  releaseGroup: string;
  title: string;
  date: string;
  images: DemoImage[];
}

/** The demo catalogue: fixed MBIDs, so the URLs printed at start-up stay the same. */
export const DEMO: { releases: DemoRelease[]; chosen: { releaseGroup: string; release: string } } = {
  releases: [
    {
      mbid: '5eefe000-0000-4000-8000-000000000001',
      releaseGroup: 'a0000000-0000-4000-8000-0000000000a1',
      title: 'Night Drive',
      date: '2019-05-17',
      images: [
        { types: ['Front'], comment: '', hue: 220, pattern: 'rings' },
        { types: ['Back'], comment: 'track listing', hue: 200, pattern: 'bars' },
        { types: ['Booklet'], comment: 'page 1', hue: 260, pattern: 'grid' },
      ],
    },
    {
      mbid: '5eefe000-0000-4000-8000-000000000002',
      releaseGroup: 'a0000000-0000-4000-8000-0000000000a1',
      title: 'Night Drive (Deluxe Edition)',
      date: '2021-11-05',
      images: [{ types: ['Front'], comment: 'deluxe cover', hue: 330, pattern: 'rings' }],
    },
    {
      mbid: '5eefe000-0000-4000-8000-000000000003',
      releaseGroup: 'a0000000-0000-4000-8000-0000000000a2',
      title: 'Paper Lanterns',
      date: '2004',
      images: [
        { types: ['Front'], comment: '', hue: 35, pattern: 'grid' },
        { types: ['Back', 'Spine'], comment: '', hue: 15, pattern: 'bars' },
      ],
    },
  ],
  chosen: { releaseGroup: 'a0000000-0000-4000-8000-0000000000a1', release: '5eefe000-0000-4000-8000-000000000002' },
};

function coverSvg(title: string, image: DemoImage, size = 1400): string {
  const { hue } = image;
  const shapes: string[] = [];
  if (image.pattern === 'rings') {
    for (let i = 9; i > 0; i--) {
      shapes.push(`<circle cx="${size / 2}" cy="${size * 0.45}" r="${i * size * 0.05}" fill="hsl(${(hue + i * 12) % 360},70%,${20 + i * 6}%)"/>`);
    }
  } else if (image.pattern === 'bars') {
    for (let i = 0; i < 14; i++) {
      shapes.push(`<rect x="0" y="${i * size * 0.05}" width="${size}" height="${size * 0.03}" fill="hsl(${(hue + i * 7) % 360},60%,${30 + (i % 5) * 8}%)"/>`);
    }
  } else {
    for (let x = 0; x < 8; x++) {
      for (let y = 0; y < 6; y++) {
        shapes.push(`<rect x="${x * size * 0.125 + 6}" y="${y * size * 0.125 + 6}" width="${size * 0.125 - 12}" height="${size * 0.125 - 12}" rx="10" fill="hsl(${(hue + (x + y) * 9) % 360},65%,${35 + ((x * y) % 4) * 10}%)"/>`);
      }
    }
  }
  const label = `${title} · ${image.types.join(', ') || 'untyped'}`;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${size}" height="${size}">
<rect width="100%" height="100%" fill="hsl(${hue},40%,12%)"/>
${shapes.join('\n')}
<rect x="0" y="${size * 0.8}" width="${size}" height="${size * 0.2}" fill="rgba(0,0,0,0.55)"/>
<text x="${size / 2}" y="${size * 0.9}" font-family="sans-serif" font-size="${size * 0.05}" fill="#fff" text-anchor="middle">${escapeHtml(label)}</text>
</svg>`;
}

/**
 * Loads the demo catalogue through the same functions the CLI uses (real JPEGs,
 * real thumbnails). Releases already present are left alone.
 */
export async function loadDemo(deps: CoverArtDeps): Promise<{ added: string[] }> {
  const added: string[] = [];
  for (const release of DEMO.releases) {
    if (await findRelease(deps.db, release.mbid)) continue;
    await addRelease(deps, { mbid: release.mbid, releaseGroup: release.releaseGroup, title: release.title, date: release.date });
    for (const image of release.images) {
      const bytes = await renderSvgToJpeg(coverSvg(release.title, image));
      // The listing's edit is the sleeve edit recording the addition, whose page (/edit/N) exists.
      await addArt(deps, { release: release.mbid, bytes, types: image.types, comment: image.comment, approved: true });
    }
    added.push(release.mbid);
  }
  if (added.length > 0) await setGroupCover(deps, DEMO.chosen.releaseGroup, DEMO.chosen.release);
  return { added };
}
