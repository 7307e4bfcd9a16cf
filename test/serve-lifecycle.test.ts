import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { CLI, DIALECT, freePort, makeTestEnv, type TestEnv } from './helpers/env.js';
import { within } from './helpers/wait.js';

describe(`sleeve serve: start-up and graceful shutdown (${DIALECT})`, () => {
  let t: TestEnv;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_DEMO: 'on' });
  });

  after(async () => {
    await t?.cleanup();
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`loads the demo, answers, and on ${signal} stops accepting, then exits 0`, async () => {
      const port = await freePort();
      const authPort = await freePort();
      const env = { ...t.env, SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_AUTH_LISTEN: `127.0.0.1:${authPort}`, SLEEVE_BASE_URL: `http://127.0.0.1:${port}` };
      const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLEEVE_')));
      const child = spawn(process.execPath, [CLI, 'serve'], { env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      let stdout = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      const deadline = Date.now() + 60_000;
      while (!stderr.includes('sleeve is running') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.match(stderr, /sleeve is running/, stderr);

      // The printed URLs work: the demo front of the first release is a 307 to an existing image.
      const url = /curl -i (http:\S+\/front-250)/.exec(stderr)?.[1];
      assert.ok(url !== undefined, stderr);
      const res = await fetch(url, { redirect: 'manual' });
      assert.equal(res.status, 307);
      const image = await fetch(res.headers.get('location') as string);
      assert.equal(image.status, 200);
      assert.equal(image.headers.get('content-type'), 'image/jpeg');
      assert.ok((await image.arrayBuffer()).byteLength > 0);

      child.kill(signal);
      const code = await within(exited, 15_000, `exit after ${signal}`).catch(() => 'timeout');
      assert.equal(code, 0, `${stderr}\n${stdout}`);
      assert.match(stderr, new RegExp(`${signal}, finishing requests in flight and stopping`));
      await assert.rejects(fetch(`http://127.0.0.1:${port}/`), 'the listener is closed');
    });
  }
});
