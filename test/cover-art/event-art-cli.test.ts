/*
 * `sleeve art list|edit|remove|reorder` given an event's MBID (docs/cli.md): the event's images
 * change under its revision, its index.json is rewritten, a removed image's files go, and
 * /event/… answers the change. Mistakes are refused with one line and change nothing.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliOk, DIALECT, makeTestEnv, runCli, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { fetchState, readIndex, writeInput } from './cli-support.js';

const EV = 'e2e2e2e2-3333-4444-8555-000000000001';
const OTHER = 'e2e2e2e2-3333-4444-8555-000000000002';

describe(`sleeve art commands on an event (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  const ids: string[] = [];
  const loc = async (p: string) => (await fetchState(`${s.base}${p}`)).location;
  const dl = (name: string) => `${s.base}/download/mbid-${EV}/mbid-${EV}-${name}`;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_RESPONSE_CACHE: '0' });
    s = await startServer(t);
    await cliOk(t.env, ['event', 'add', EV, '--name', 'A show']);
    await cliOk(t.env, ['event', 'add', OTHER]);
    const jpeg = await writeInput(t, 'a.jpg', (await makeJpeg(320, 200)) as Buffer);
    const png = await writeInput(t, 'b.png', (await makePng(200, 200)) as Buffer);
    ids.push((await cliOk(t.env, ['--json', 'art', 'add', EV, jpeg, '--type', 'Poster'])).id);
    ids.push((await cliOk(t.env, ['--json', 'art', 'add', EV, png, '--comment', 'back stage'])).id);
    ids.push((await cliOk(t.env, ['--json', 'art', 'add', EV, jpeg])).id);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('art list shows the event’s images in order and its revision', async () => {
    const list = await cliOk(t.env, ['--json', 'art', 'list', EV]);
    assert.equal(list.event, EV);
    assert.equal(list.revision, 3);
    assert.deepEqual(
      list.images.map((i: any) => [i.id, i.types, i.comment, i.front]),
      [
        [ids[0], ['Poster'], '', true],
        [ids[1], [], 'back stage', false],
        [ids[2], [], '', false],
      ],
    );
    const human = await runCli(t.env, ['art', 'list', EV]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, new RegExp(`^ID +TYPES +APPROVED +COMMENT +IMAGE\\n${ids[0]} +Poster +yes +- +\\S+/event/${EV}/${ids[0]}\\.jpg\\n`));
    assert.match(human.stdout, /\nrevision 3\n$/);
    assert.match((await runCli(t.env, ['art', 'list', OTHER])).stdout, new RegExp(`^event ${OTHER} has no images\\nrevision 0\\n$`));
  });

  it('art edit changes types, comment and approval; front follows the Poster', async () => {
    const edited = await cliOk(t.env, ['--json', 'art', 'edit', EV, ids[1] as string, '--type', 'poster', '--comment', 'the poster', '--expect-revision', '3']);
    assert.deepEqual([edited.id, edited.types, edited.comment], [ids[1], ['Poster'], 'the poster']);
    await cliOk(t.env, ['art', 'edit', EV, ids[0] as string, '--type', 'Poster', '--unapproved']);
    const human = await runCli(t.env, ['art', 'edit', EV, ids[2] as string, '--comment', 'x']);
    assert.match(human.stdout, new RegExp(`^edited image ${ids[2]} \\(no type\\) on event ${EV}\\n`));
    const listing = await readIndex(t, EV);
    assert.deepEqual(
      listing.images.map((i: any) => [i.id, i.types, i.comment, i.approved, i.front]),
      [
        [ids[0], ['Poster'], '', false, true],
        [ids[1], ['Poster'], 'the poster', true, false],
        [ids[2], [], 'x', true, false],
      ],
    );
    // Two Posters: the first in order answers front (approval is not required by default).
    assert.equal(await loc(`/event/${EV}/front`), dl(`${ids[0]}.jpg`));
  });

  it('refuses a stale revision, an unknown type and an image of another event, changing nothing', async () => {
    const before = await cliOk(t.env, ['--json', 'art', 'list', EV]);
    const stale = await runCli(t.env, ['art', 'edit', EV, ids[2] as string, '--comment', 'y', '--expect-revision', '3']);
    assert.notEqual(stale.code, 0);
    assert.match(stale.stderr, new RegExp(`^sleeve: event ${EV} changed since revision 3 \\(it is at ${before.revision}\\)`));
    const kind = await runCli(t.env, ['art', 'edit', EV, ids[2] as string, '--type', 'Front']);
    assert.equal(kind.code, 2);
    assert.match(kind.stderr, /unknown event art type "Front"; known types: Poster/);
    const elsewhere = await runCli(t.env, ['art', 'remove', OTHER, ids[2] as string]);
    assert.notEqual(elsewhere.code, 0);
    assert.match(elsewhere.stderr, new RegExp(`event image with id ${ids[2]} not found on event ${OTHER}`));
    assert.deepEqual(await cliOk(t.env, ['--json', 'art', 'list', EV]), before);
  });

  it('art reorder puts the images in the order given (every image named once)', async () => {
    const missing = await runCli(t.env, ['art', 'reorder', EV, ids[2] as string, ids[0] as string]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, new RegExp(`every image of the event must be named; missing: ${ids[1]}`));
    const r = await cliOk(t.env, ['--json', 'art', 'reorder', EV, ids[2] as string, ids[1] as string, ids[0] as string]);
    assert.deepEqual(r, { event: EV, order: [ids[2], ids[1], ids[0]] });
    assert.deepEqual((await readIndex(t, EV)).images.map((i: any) => i.id), [ids[2], ids[1], ids[0]]);
    assert.equal(await loc(`/event/${EV}/front`), dl(`${ids[1]}.png`));
  });

  it('art remove removes the image, its listing entry and its files', async () => {
    const folder = path.join(t.dir, 'files', `mbid-${EV}`);
    const original = path.join(folder, `mbid-${EV}-${ids[1]}.png`);
    assert.ok(existsSync(original));
    const r = await cliOk(t.env, ['--json', 'art', 'remove', EV, ids[1] as string]);
    assert.deepEqual(r, { removed: ids[1], event: EV });
    assert.equal(existsSync(original), false);
    assert.equal(existsSync(path.join(folder, `mbid-${EV}-${ids[1]}_thumb250.jpg`)), false);
    assert.deepEqual((await readIndex(t, EV)).images.map((i: any) => [i.id]), [[ids[2]], [ids[0]]]);
    assert.equal((await fetchState(`${s.base}/event/${EV}/${ids[1]}`)).status, 404);
    assert.equal(await loc(`/event/${EV}/front`), dl(`${ids[0]}.jpg`));
    const list = await cliOk(t.env, ['--json', 'art', 'list', EV]);
    assert.deepEqual(list.images.map((i: any) => i.id), [ids[2], ids[0]]);
  });

  it("each change is an edit of the operator's, the event's history (edit list --event), as a release's", async () => {
    const list = await cliOk(t.env, ['--json', 'edit', 'list', '--event', EV]);
    assert.deepEqual(
      list.edits.map((e: any) => [e.kind, e.event, e.release, e.editor, e.status]).reverse(),
      [
        ...ids.map(() => ['add', EV, null, null, 'applied']),
        ...['edit', 'edit', 'edit', 'reorder', 'remove'].map((kind) => [kind, EV, null, null, 'applied']),
      ],
    );
    const added = list.edits[list.edits.length - 1];
    assert.equal(added.image, ids[0]);
    assert.equal((await cliOk(t.env, ['--json', 'art', 'list', EV])).images.find((i: any) => i.id === ids[0]).edit, added.id, "the listing's edit is the edit that added the image");
    const human = await runCli(t.env, ['edit', 'show', String(added.id)]);
    assert.match(human.stdout, new RegExp(`\\n  event:    ${EV}\\n`));
    assert.deepEqual((await cliOk(t.env, ['--json', 'edit', 'list', '--event', OTHER])).edits, []);
    const both = await runCli(t.env, ['edit', 'list', '--event', EV, '--release', OTHER]);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--release and --event contradict each other/);
  });

  it('a release MBID still means the release; neither names the release as before', async () => {
    const none = await runCli(t.env, ['art', 'list', '00000000-0000-4000-8000-000000000000']);
    assert.notEqual(none.code, 0);
    assert.match(none.stderr, /no release 00000000-0000-4000-8000-000000000000/);
  });
});
