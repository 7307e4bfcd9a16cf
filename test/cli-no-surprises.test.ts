/*
 * The operator's CLI cannot surprise, through the real binary (docs/cli.md):
 * a command other than serve, migrate and demo never makes a database, and says which folder it
 * looked in and how to point elsewhere (--data-dir, SLEEVE_DATA_DIR); a PostgreSQL database that
 * is missing, unreachable or never migrated, a listen address in use and a missing file are one
 * line each, without a stack; usage mistakes name what exists; -v is --version; the audit line
 * of user add and app add goes to the log, not to a terminal.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { CLI, cliOk, DIALECT, freePort, makeTestEnv, runCli, type CliResult, type TestEnv } from './helpers/env.js';
import { newMbid } from './cover-art/cli-support.js';
import { runCliWithin } from './cover-art/cli-support.js';

/** One line on stderr, `sleeve: …`, and no stack trace. */
function assertOneLine(r: CliResult, pattern: RegExp, exit = 1): string {
  const where = `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
  assert.equal(r.code, exit, where);
  assert.match(r.stderr, /^sleeve: [^\n]+\n$/, `one line: ${where}`);
  assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack');
  assert.match(r.stderr, pattern);
  return r.stderr;
}

/** The environment without a database or data folder of its own: the default ./data of the folder it runs in. */
function bare(env: Record<string, string>): Record<string, string> {
  const { SLEEVE_DATA_DIR: _dir, SLEEVE_DATABASE_URL: _url, ...rest } = env;
  return rest;
}

describe(`the CLI never surprises the operator (${DIALECT})`, () => {
  let t: TestEnv;
  let elsewhere: string;
  before(async () => {
    t = await makeTestEnv();
    // "Another folder": one with no ./data, where a command is run by mistake.
    elsewhere = await mkdtemp(path.join(tmpdir(), 'sleeve-elsewhere-'));
  });
  after(async () => {
    await t?.cleanup();
    await rm(elsewhere, { recursive: true, force: true });
  });

  it('a command run from another folder makes no database: it names the folder it looked in and how to point elsewhere', async () => {
    const r = await runCli(bare(t.env), ['user', 'list'], { cwd: elsewhere });
    const line = assertOneLine(r, new RegExp(`^sleeve: no sleeve database in ${path.join(elsewhere, 'data')} \\(the default data folder \\./data of the current folder, as SLEEVE_DATA_DIR is unset\\)`));
    assert.match(line, /--data-dir DIR or SLEEVE_DATA_DIR=DIR/);
    assert.match(line, /sleeve migrate/);
    assert.deepEqual(await readdir(elsewhere), [], 'no ./data, no sleeve.db');
    // The folder named by SLEEVE_DATA_DIR or --data-dir is said to come from there.
    const missing = path.join(elsewhere, 'nowhere');
    assertOneLine(await runCli({ ...bare(t.env), SLEEVE_DATA_DIR: missing }, ['app', 'list']), new RegExp(`no sleeve database in ${missing} \\(the data folder SLEEVE_DATA_DIR names\\)`));
    assertOneLine(await runCli(bare(t.env), ['app', 'list', '--data-dir', missing]), new RegExp(`no sleeve database in ${missing} \\(the data folder --data-dir names\\)`));
    assert.equal(existsSync(missing), false);
  });

  it('every command but serve, migrate and demo refuses a missing database (NO_DATABASE, exit 1) and creates nothing', async () => {
    const M = newMbid();
    const commands: [string[], string?][] = [
      [['release', 'list']],
      [['release', 'add', M, '--release-group', newMbid()]],
      [['art', 'list', M]],
      [['art', 'reindex']],
      [['edit', 'list']],
      [['user', 'add', 'alice', '--email', 'alice@example.org', '--password-stdin'], 'a password\n'],
      [['app', 'add', '--owner', 'alice', '--name', 'Tool', '--type', 'public']],
      [['keys', 'list']],
      [['import', 'musicbrainz', elsewhere]],
      [['mirror', 'images', M]],
    ];
    const env = { ...bare(t.env), SLEEVE_UPSTREAM_URL: 'http://127.0.0.1:9/' };
    for (const [args, stdin] of commands) {
      const r = await runCli(env, ['--json', ...args], { cwd: elsewhere, stdin });
      assert.equal(r.code, 1, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(JSON.parse(r.stdout).error.code, 'NO_DATABASE', args.join(' '));
      assert.deepEqual(await readdir(elsewhere), [], `${args.join(' ')} created nothing`);
    }
  });

  it('--data-dir DIR, before or after the command, points every command at that folder, over SLEEVE_DATA_DIR', async () => {
    const dir = path.join(elsewhere, 'mine');
    const env = { ...bare(t.env), SLEEVE_DATA_DIR: path.join(elsewhere, 'not-this-one') };
    try {
      await cliOk(env, ['--data-dir', dir, 'migrate']);
      assert.ok(existsSync(path.join(dir, 'sleeve.db')), 'migrate made the database there');
      await cliOk(env, ['user', 'add', 'alice', '--email', 'alice@example.org', '--password-stdin', `--data-dir=${dir}`], { stdin: 'secret words\n' });
      const users = await cliOk(env, ['user', 'list', '--json', '--data-dir', dir]);
      assert.deepEqual(users.users.map((u: { name: string }) => u.name), ['alice']);
      assert.equal(existsSync(path.join(elsewhere, 'not-this-one')), false, 'SLEEVE_DATA_DIR lost to --data-dir');
      assertOneLine(await runCli(env, ['user', 'list', '--data-dir']), /--data-dir needs a folder/, 2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  if (DIALECT === 'sqlite') {
    it('SQLite: a file without sleeve\'s tables, or not a database at all, is one line', async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'sleeve-odd-db-'));
      try {
        await writeFile(path.join(dir, 'sleeve.db'), '');
        assertOneLine(await runCli({ ...bare(t.env), SLEEVE_DATA_DIR: dir }, ['user', 'list']), /^sleeve: the SQLite database .*sleeve\.db has no sleeve tables yet: run sleeve migrate first\n$/);
        await writeFile(path.join(dir, 'sleeve.db'), 'not a database, just text '.repeat(200));
        const r = await runCli({ ...bare(t.env), SLEEVE_DATA_DIR: dir }, ['--json', 'user', 'list']);
        assert.equal(r.code, 1);
        assert.equal(JSON.parse(r.stdout).error.code, 'DATABASE_UNREACHABLE');
        assert.match(r.stderr, /^sleeve: cannot open the SQLite database .*sleeve\.db: file is not a database\n$/);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  }

  if (DIALECT === 'postgres') {
    it('PostgreSQL: a missing database, an unreachable server and a database never migrated are one line each', async () => {
      const url = new URL(t.env.SLEEVE_DATABASE_URL as string);
      const name = `sleeve_test_${randomBytes(6).toString('hex')}`;
      const missing = new URL(url.href);
      missing.pathname = `/${name}`;
      for (const args of [['user', 'list'], ['migrate']]) {
        const line = assertOneLine(await runCli({ ...t.env, SLEEVE_DATABASE_URL: missing.href }, args), new RegExp(`PostgreSQL at ${url.hostname}:${url.port || 5432} has no database "${name}"`));
        assert.match(line, new RegExp(`create it first: createdb -h ${url.hostname} -p ${url.port || 5432}.* ${name}\\n$`));
      }
      const serve = await runCliWithin({ ...t.env, SLEEVE_DATABASE_URL: missing.href }, ['serve'], 60_000);
      assert.equal(serve.timedOut, false);
      assertOneLine(serve, /has no database/);

      const down = new URL(url.href);
      down.port = String(await freePort());
      down.password = 'hunter2';
      const r = await runCli({ ...t.env, SLEEVE_DATABASE_URL: down.href }, ['--json', 'app', 'list']);
      assert.equal(JSON.parse(r.stdout).error.code, 'DATABASE_UNREACHABLE');
      assertOneLine(r, new RegExp(`cannot reach PostgreSQL at ${down.hostname}:${down.port} .*ECONNREFUSED`));
      assert.doesNotMatch(r.stderr + r.stdout, /hunter2/, 'no password in the message');

      const admin = new pg.Client({ connectionString: url.href });
      await admin.connect();
      await admin.query(`CREATE DATABASE ${name}`);
      try {
        const empty = await runCli({ ...t.env, SLEEVE_DATABASE_URL: missing.href }, ['--json', 'user', 'list']);
        assert.equal(JSON.parse(empty.stdout).error.code, 'NOT_MIGRATED');
        assertOneLine(empty, /has no sleeve tables yet: run sleeve migrate first/);
        await cliOk({ ...t.env, SLEEVE_DATABASE_URL: missing.href }, ['migrate']);
        assert.deepEqual(await cliOk({ ...t.env, SLEEVE_DATABASE_URL: missing.href }, ['--json', 'user', 'list']), { users: [] });
      } finally {
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await admin.end();
      }
    });
  }

  it('serve: a listen address in use is one line naming the variable to change', async () => {
    const port = await freePort();
    const holder: Server = createServer();
    await new Promise<void>((resolve) => holder.listen(port, '127.0.0.1', resolve));
    try {
      for (const variable of ['SLEEVE_COVERART_LISTEN', 'SLEEVE_AUTH_LISTEN']) {
        const r = await runCliWithin({ ...t.env, [variable]: `127.0.0.1:${port}` }, ['--json', 'serve'], 60_000);
        assert.equal(r.timedOut, false, 'serve exited');
        // The error alone: nothing logged on the way out (a look of the catalogue watch's once
        // outlived the database it read, and warned after the error).
        assert.equal(r.stdout.trimEnd().split('\n').length, 1, r.stdout);
        assert.equal(JSON.parse(r.stdout).error.code, 'CANNOT_LISTEN');
        assertOneLine(r, new RegExp(`^sleeve: cannot listen on 127\\.0\\.0\\.1:${port}: it is in use by another process: stop it, or give ${variable} another host:port\\n$`));
      }
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  it('a file that does not exist is one line: an image, a --config file, a TLS certificate', async () => {
    assertOneLine(await runCli(t.env, ['art', 'add', newMbid(), path.join(elsewhere, 'cover.jpg')]), /cannot read .*cover\.jpg: no such file/, 2);
    assertOneLine(await runCli(t.env, ['--config', path.join(elsewhere, 'sleeve.json'), 'user', 'list']), /--config .*sleeve\.json: no such file/, 2);
    const cert = path.join(elsewhere, 'cert.pem');
    const r = await runCliWithin({ ...t.env, SLEEVE_TLS_CERT: cert, SLEEVE_TLS_KEY: path.join(elsewhere, 'key.pem') }, ['serve', '--only', 'auth'], 60_000);
    assert.equal(r.timedOut, false, 'serve exited');
    assertOneLine(r, new RegExp(`^sleeve: cannot read SLEEVE_TLS_CERT ${cert}: no such file\\n$`));
  });

  it('usage mistakes say what is wrong and list what exists; -v prints the version', async () => {
    const bogus = await runCli(t.env, ['--bogus']);
    assert.equal(bogus.code, 2);
    assert.match(bogus.stderr, /^sleeve: unknown option --bogus and no command given \(sleeve's own options: --config FILE, --data-dir DIR, --json, --help, --version; a command's come after it\)\n/);
    assert.match(bogus.stderr, /^ {2}user list$/m, 'the commands follow');
    const art = await runCli(t.env, ['art']);
    assert.equal(art.code, 2);
    assert.match(art.stderr, /^sleeve: sleeve art needs a subcommand: one of add, edit, remove, reorder, reindex, list, measure\n/);
    assert.match(art.stderr, /^ {2}art reorder RELEASE_MBID IMAGE_ID\.\.\./m);
    assert.match((await runCli(t.env, ['art', 'paint'])).stderr, /^sleeve: unknown command: art paint: one of add, edit/);
    const v = await runCli(t.env, ['-v']);
    assert.equal(v.code, 0);
    assert.equal(v.stdout, (await runCli(t.env, ['--version'])).stdout);
    assert.match(v.stdout, /^sleeve \d+\.\d+\.\d+/);
  });

  it('user add and app add on a terminal: the audit lines go to audit.log in the data folder, not to the screen', async () => {
    const password = path.join(elsewhere, 'password');
    await writeFile(password, 'secret words\n');
    const sleeve = `'${process.execPath}' '${CLI}'`;
    const script = `${sleeve} user add tty-user --email tty@example.org --password-stdin < '${password}' && ${sleeve} app add --owner tty-user --name 'Tty Tool' --type public`;
    // util-linux script(1): the commands' stdout and stderr are a pseudo-terminal.
    const child = spawn('script', ['-qec', script, '/dev/null'], { env: { ...process.env, ...t.env, SLEEVE_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let screen = '';
    child.stdout.on('data', (c: Buffer) => (screen += c.toString()));
    child.stderr.on('data', (c: Buffer) => (screen += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 0, screen);
    assert.match(screen, /added user tty-user/);
    assert.match(screen, /registered public application Tty Tool/);
    assert.doesNotMatch(screen, /"audit"/, 'no JSON audit line on the terminal');
    const log = path.join(t.dir, 'audit.log');
    const lines = (await readFile(log, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      lines.map((l) => [l.msg, l.audit, l.user, l.via]),
      [
        ['audit', 'user.created', 'tty-user', 'cli'],
        ['audit', 'app.registered', 'tty-user', 'cli'],
      ],
    );
    assert.equal((await stat(log)).mode & 0o777, 0o600, 'audit.log is private');
  });

  it("the demo's images name the sleeve edits that added them, each with its page", async () => {
    const demo = await makeTestEnv();
    try {
      const { added } = await cliOk(demo.env, ['--json', 'demo']);
      const listing = await cliOk(demo.env, ['--json', 'art', 'list', added[0]]);
      assert.ok(listing.images.length > 0);
      for (const image of listing.images as { id: string; edit: number }[]) {
        assert.ok(image.edit > 1_000_000_000, `edit ${image.edit} is sleeve's own`);
        const edit = await cliOk(demo.env, ['--json', 'edit', 'show', String(image.edit)]);
        assert.deepEqual([edit.kind, edit.image], ['add', image.id]);
      }
    } finally {
      await demo.cleanup();
    }
  });
});
