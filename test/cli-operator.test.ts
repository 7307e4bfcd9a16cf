/*
 * The operator's CLI, through the real binary: `--version`, each command's own `--help`,
 * a clean message for an unknown or incomplete option, and the listing commands
 * (`release list`, `art list`, `user list`, `app list`) with and without --json, never
 * showing a secret or a hash.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliOk, DIALECT, makeTestEnv, ROOT, runCli, type TestEnv } from './helpers/env.js';
import { makePng } from './helpers/images.js';
import { newMbid, readIndex } from './cover-art/cli-support.js';

/** Every command, by the words that name it. */
const COMMANDS = [
  'serve',
  'migrate',
  'demo',
  'release add',
  'release merge',
  'release list',
  'release-group set-cover',
  'art add',
  'art edit',
  'art remove',
  'art reorder',
  'art reindex',
  'art list',
  'user add',
  'user list',
  'app add',
  'app list',
  'import musicbrainz',
];

describe(`the operator's CLI (${DIALECT})`, () => {
  let t: TestEnv;
  before(async () => {
    t = await makeTestEnv();
  });
  after(async () => t?.cleanup());

  it('--version prints the version of package.json', async () => {
    const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const r = await runCli(t.env, ['--version']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `sleeve ${pkg.version}\n`);
    assert.deepEqual(JSON.parse((await runCli(t.env, ['--version', '--json'])).stdout), { version: pkg.version });
  });

  it('COMMAND --help describes that command and every one of its options, and differs per command', async () => {
    const seen = new Set<string>();
    for (const name of COMMANDS) {
      const words = name.split(' ');
      const r = await runCli(t.env, [...words, '--help']);
      assert.equal(r.code, 0, `${name} --help: ${r.stderr}`);
      assert.ok(r.stdout.startsWith(`usage: sleeve ${name}`), `${name} --help:\n${r.stdout}`);
      seen.add(r.stdout);
      // The options section: `  --flag [VALUE]   description`, each with its description.
      const section = r.stdout.split('\nOptions:\n')[1]?.split('\n\n')[0];
      if (section !== undefined) {
        for (const line of section.split('\n')) assert.match(line, /^ {2}--[a-z-]+( \S+)?( \.\.\.)? {3,}\S/, `${name}: an option without a description: ${JSON.stringify(line)}`);
      }
    }
    assert.equal(seen.size, COMMANDS.length, 'each command has its own help');
    const art = await runCli(t.env, ['art', 'add', '--help']);
    // The same from `sleeve help COMMAND` and `-h`.
    assert.equal((await runCli(t.env, ['help', 'art', 'add'])).stdout, art.stdout);
    assert.equal((await runCli(t.env, ['art', 'add', '-h'])).stdout, art.stdout);
    assert.match(art.stdout, /--type NAME \.\.\. +an art type/);
    assert.match(art.stdout, /--approved +mark the image approved/);
    // A group of commands lists its members; the global help lists everything.
    const group = await runCli(t.env, ['art', '--help']);
    assert.equal(group.code, 0);
    for (const sub of ['add', 'edit', 'remove', 'reorder', 'reindex', 'list']) assert.match(group.stdout, new RegExp(`^ {2}art ${sub}\\b`, 'm'));
    const global = await runCli(t.env, ['--help']);
    for (const name of COMMANDS) assert.ok(global.stdout.includes(`  ${name}`), `${name} in the global usage`);
  });

  it('an unknown option gets one line naming it, exit 2; --json gives it as an error object', async () => {
    const r = await runCli(t.env, ['art', 'add', newMbid(), 'x.jpg', '--frontt']);
    assert.equal(r.code, 2);
    assert.equal(r.stderr, 'sleeve: unknown option --frontt for sleeve art add (its options: --type, --comment, --edit, --approved, --unapproved; see: sleeve art add --help)\n');
    const m = await runCli(t.env, ['migrate', '--force']);
    assert.equal(m.code, 2);
    assert.match(m.stderr, /^sleeve: unknown option --force for sleeve migrate \(sleeve migrate takes no options/);
    assert.equal(m.stderr.split('\n').length, 2, 'one line, not the whole usage');
    const j = await runCli(t.env, ['--json', 'user', 'list', '--all']);
    assert.equal(j.code, 2);
    assert.deepEqual(JSON.parse(j.stdout), { error: { code: 'USAGE', message: 'unknown option --all for sleeve user list (sleeve user list takes no options; see: sleeve user list --help)' } });
    const v = await runCli(t.env, ['release', 'add', newMbid(), '--release-group']);
    assert.equal(v.code, 2);
    assert.equal(v.stderr, 'sleeve: option --release-group of sleeve release add needs a value (see: sleeve release add --help)\n');
  });

  it('release list, art list, user list and app list, as text and as JSON, without secrets or hashes', async () => {
    const empty = await cliOk(t.env, ['release', 'list', '--json']);
    assert.deepEqual(empty, { releases: [], next: null });
    const group = newMbid();
    const releases = [newMbid(), newMbid(), newMbid()].sort();
    for (const [i, mbid] of releases.entries()) await cliOk(t.env, ['release', 'add', mbid, '--release-group', group, '--title', `Album ${i}`, '--date', `200${i}-0${i + 1}`]);
    const a = releases[0] as string;
    await cliOk(t.env, ['art', 'add', a, '-', '--type', 'Front', '--approved', '--comment', 'the cover'], { stdin: await makePng(40, 40) });
    await cliOk(t.env, ['art', 'add', a, '-', '--type', 'Back', '--type', 'Spine', '--unapproved'], { stdin: await makePng(30, 30) });

    // Releases, a page at a time.
    const page1 = await cliOk(t.env, ['release', 'list', '--limit', '2', '--json']);
    assert.deepEqual(page1, {
      releases: [
        { mbid: releases[0], release_group: group, title: 'Album 0', date: '2000-01', images: 2 },
        { mbid: releases[1], release_group: group, title: 'Album 1', date: '2001-02', images: 0 },
      ],
      next: releases[1],
    });
    const page2 = await cliOk(t.env, ['release', 'list', '--limit', '2', '--after', page1.next, '--json']);
    assert.deepEqual(page2, { releases: [{ mbid: releases[2], release_group: group, title: 'Album 2', date: '2002-03', images: 0 }], next: null });
    const text = await cliOk(t.env, ['release', 'list', '--limit', '2']);
    assert.match(text, new RegExp(`^${releases[0]} +${group} +2 +2000-01 +Album 0$`, 'm'));
    assert.match(text, new RegExp(`sleeve release list --after ${releases[1]} --limit 2`));
    const badLimit = await runCli(t.env, ['release', 'list', '--limit', '0']);
    assert.equal(badLimit.code, 2);
    assert.match(badLimit.stderr, /--limit must be a whole number from 1 to 10000/);

    // A release's images: the entries of its index.json.
    const art = await cliOk(t.env, ['art', 'list', a, '--json']);
    assert.deepEqual(art, { release: a, images: (await readIndex(t, a)).images, revision: 2, pending: [] });
    assert.deepEqual(art.images.map((i: { types: string[] }) => i.types), [['Front'], ['Back', 'Spine']]);
    const artText = await cliOk(t.env, ['art', 'list', a]);
    assert.match(artText, new RegExp(`^${art.images[0].id} +Front +yes +"the cover" +${art.images[0].image.replace(/[.]/g, '\\.')}$`, 'm'));
    assert.match(artText, new RegExp(`^${art.images[1].id} +Back,Spine +no +- +`, 'm'));
    const missing = await runCli(t.env, ['art', 'list', newMbid()]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /no release/);

    // Users and applications: no password hash, no client secret.
    await cliOk(t.env, ['user', 'add', 'alice', '--email', 'alice@example.com', '--password-stdin', '--email-verified'], { stdin: 'a long password\n' });
    await cliOk(t.env, ['user', 'add', 'bob', '--email', 'bob@example.com', '--password-stdin'], { stdin: 'another long password\n' });
    const web = await cliOk(t.env, ['--json', 'app', 'add', '--owner', 'alice', '--name', 'Web', '--type', 'confidential', '--redirect-uri', 'https://app.example/cb']);
    const desk = await cliOk(t.env, ['--json', 'app', 'add', '--owner', 'bob', '--name', 'Desk', '--type', 'public']);
    const users = await cliOk(t.env, ['user', 'list', '--json']);
    assert.deepEqual(
      users.users.map((u: Record<string, unknown>) => ({ ...u, id: typeof u.id, created: typeof u.created })),
      [
        { id: 'number', name: 'alice', email: 'alice@example.com', email_verified: true, role: 'editor', created: 'string' },
        { id: 'number', name: 'bob', email: 'bob@example.com', email_verified: false, role: 'editor', created: 'string' },
      ],
    );
    const apps = await cliOk(t.env, ['app', 'list', '--json']);
    assert.deepEqual(
      apps.applications.map((x: Record<string, unknown>) => ({ ...x, created: typeof x.created })),
      [
        { client_id: web.client_id, name: 'Web', type: 'confidential', owner: 'alice', redirect_uri: 'https://app.example/cb', redirect_uris: ['https://app.example/cb'], id_token_alg: 'RS256', created: 'string' },
        { client_id: desk.client_id, name: 'Desk', type: 'public', owner: 'bob', redirect_uri: null, redirect_uris: [], id_token_alg: 'RS256', created: 'string' },
      ],
    );
    assert.deepEqual((await cliOk(t.env, ['app', 'list', '--owner', 'BOB', '--json'])).applications.map((x: { name: string }) => x.name), ['Desk']);
    const all = [await cliOk(t.env, ['user', 'list']), await cliOk(t.env, ['app', 'list']), JSON.stringify(users), JSON.stringify(apps)].join('\n');
    for (const secret of [web.client_secret, desk.client_secret, 'a long password']) assert.ok(!all.includes(secret), 'no secret is shown');
    assert.doesNotMatch(all, /hash|scrypt|\$/i);
    assert.match(await cliOk(t.env, ['user', 'list']), /^\d+ +alice +alice@example\.com +yes /m);
    assert.match(await cliOk(t.env, ['app', 'list']), new RegExp(`^${desk.client_id} +public +bob +Desk +- +RS256$`, 'm'));
  });
});
