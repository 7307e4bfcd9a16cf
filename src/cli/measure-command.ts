/*
 * `sleeve art measure [RELEASE_MBID…]`: fills the listings' additive fields (width, height, size,
 * mime_type, thumbnail_dimensions; docs/interface.md, "Image entry") from the stored files of the
 * releases (or events) named, or of every release and event with images, and rewrites the
 * index.json of each whose fields changed. One line per release; exit 1 when any image could not be measured.
 */
import { findEvent } from '../cover-art/catalogue/event-repo.js';
import { findRelease } from '../cover-art/index.js';
import type { ReleaseMeasured } from '../cover-art/images/measure.js';
import { invalidInput, notFound } from '../shared/errors.js';
import { parseMbid } from '../shared/uuid.js';
import type { Command, CommandContext } from './command.js';
import { withRuntime } from './commands.js';

/** An event's measuring reports its MBID as `event`. */
type Measured = ReleaseMeasured | (Omit<ReleaseMeasured, 'release'> & { event: string });

function describe(r: Measured): string {
  const notStored = r.missing > 0 ? `, ${r.missing} not in the store (left unknown)` : '';
  const failed = r.errors.length > 0 ? `, ${r.errors.length} failed` : '';
  const lines = [`${'event' in r ? `event ${r.event}` : `release ${r.release}`}: measured ${r.measured} of ${r.images} image(s)${notStored}${failed}; index.json ${r.changed ? 'rewritten' : 'unchanged'}`];
  for (const e of r.errors) lines.push(`  image ${e.image}: ${e.message}`);
  return lines.join('\n');
}

async function run(ctx: CommandContext): Promise<number> {
  const mbids = ctx.args.map((arg) => {
    const mbid = parseMbid(arg);
    if (mbid === undefined) throw invalidInput(`release ${JSON.stringify(arg)} is not a valid MBID (usage: sleeve art measure [RELEASE_MBID...])`);
    return mbid;
  });
  const { measureRelease } = await import('../cover-art/images/measure.js');
  // index.json files may be rewritten without a catalogue change: published anyway, for the caches.
  const results = await withRuntime(
    ctx,
    async (rt) => {
      const db = rt.database.db;
      // Every MBID is looked up before anything is measured: an unknown one changes nothing.
      const releases: { id: number; gid: string; event?: true }[] = [];
      for (const mbid of mbids) {
        const release = await findRelease(db, mbid);
        // An event's MBID (and no release's): the event's images (cover-art/catalogue/events.ts).
        const event = release === undefined ? await findEvent(db, mbid) : undefined;
        if (release === undefined && event === undefined) throw notFound(`no release ${mbid}`);
        releases.push(release ?? { ...(event as { id: number; gid: string }), event: true });
      }
      if (mbids.length === 0) {
        releases.push(
          ...(await db
            .selectFrom('release')
            .select(['id', 'gid', 'release_group'])
            .where((eb) => eb.exists(eb.selectFrom('cover_art').select('id').whereRef('cover_art.release', '=', 'release.id')))
            .orderBy('id')
            .execute()),
          ...(
            await db
              .selectFrom('event')
              .select(['id', 'gid'])
              .where((eb) => eb.exists(eb.selectFrom('event_art').select('id').whereRef('event_art.event', '=', 'event.id')))
              .orderBy('id')
              .execute()
          ).map((e) => ({ ...e, event: true as const })),
        );
      }
      const out: Measured[] = [];
      for (const release of releases) {
        const measured = await measureRelease(rt.coverArt, release, { event: release.event === true });
        const { release: gid, ...rest } = measured;
        const result: Measured = release.event === true ? { event: gid, ...rest } : measured;
        if (!ctx.json) ctx.io.stdout.write(`${describe(result)}\n`);
        out.push(result);
      }
      return out;
    },
    { rewritesFiles: true },
  );
  if (ctx.json) ctx.out('', { releases: results });
  else if (results.length === 0) ctx.out('no release has images', { releases: [] });
  return results.some((r) => r.errors.length > 0) ? 1 : 0;
}

const artMeasure: Command = { name: 'art measure', run };

/** The measuring command by name, merged with the others' in main.ts. */
export const MEASURE_COMMANDS: Record<string, Command> = { [artMeasure.name]: artMeasure };
