/*
 * Whose upload is it? A lease or a temporary folder is judged by the process that made it only
 * when that process could be seen from here (the same machine and PID namespace); a container
 * that shares the volume and the host name, but not the process ids, is another machine: its
 * work is left alone while it is fresh, and removed once it is stale.
 */
import assert from 'node:assert/strict';
import { mkdir, readdir, utimes, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hostTag } from '../../src/shared/process.js';
import { cliInProcess, DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { filesRoot, newMbid } from './cli-support.js';

/** A process id no process here has (Linux's pid_max is at most 2^22). */
const NO_SUCH_PID = 4_194_304 + 17;

async function stage(t: TestEnv, folder: string, lease: { host: string; pid: number; heartbeat: number }): Promise<void> {
  const dir = path.join(filesRoot(t), 'uploads', folder);
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, 'lease.json'), JSON.stringify(lease));
  await writeFile(path.join(dir, 'original.jpg'), 'staged bytes');
}

async function present(t: TestEnv, ...parts: string[]): Promise<boolean> {
  const dir = path.join(filesRoot(t), ...parts.slice(0, -1));
  return (await readdir(dir).catch(() => [] as string[])).includes(parts[parts.length - 1] as string);
}

describe(`upload leases across PID namespaces (${DIALECT})`, () => {
  let t: TestEnv;
  const release = newMbid();
  // What a process in another container with the same host name writes: no namespace in its tag.
  const sameNameElsewhere = hostname().replace(/[^A-Za-z0-9._-]/g, '_').replace(/^[._-]+/, '') || 'host';

  before(async () => {
    t = await makeTestEnv();
    await cliInProcess(t.env, ['release', 'add', release, '--release-group', newMbid()]);
  });
  after(async () => {
    await t?.cleanup();
  });

  it('tells this namespace from another with the same host name', () => {
    assert.notEqual(hostTag(), sameNameElsewhere, 'the tag carries the PID namespace on Linux');
    assert.ok(hostTag().startsWith(sameNameElsewhere));
  });

  it("keeps another namespace's fresh upload and temporary folder, whatever its process id", async () => {
    await stage(t, '101-aa', { host: sameNameElsewhere, pid: NO_SUCH_PID, heartbeat: Date.now() });
    const temp = path.join(filesRoot(t), '.tmp', `${sameNameElsewhere}-${NO_SUCH_PID}`);
    await mkdir(temp, { recursive: true });
    await writeFile(path.join(temp, 'part'), 'half');
    await cliInProcess(t.env, ['art', 'reindex', release]);
    assert.ok(await present(t, 'uploads', '101-aa'), 'the upload in flight elsewhere is left alone');
    assert.ok(await present(t, '.tmp', `${sameNameElsewhere}-${NO_SUCH_PID}`), 'its part-written files too');
  });

  it('removes them once stale, and at once a dead process of this namespace', async () => {
    await stage(t, '101-aa', { host: sameNameElsewhere, pid: NO_SUCH_PID, heartbeat: Date.now() - 31_000 });
    const temp = path.join(filesRoot(t), '.tmp', `${sameNameElsewhere}-${NO_SUCH_PID}`);
    const old = new Date(Date.now() - 2 * 60 * 60 * 1000);
    await utimes(temp, old, old);
    await stage(t, '102-bb', { host: hostTag(), pid: NO_SUCH_PID, heartbeat: Date.now() });
    await cliInProcess(t.env, ['art', 'reindex', release]);
    assert.equal(await present(t, 'uploads', '101-aa'), false, 'a stale lease of another machine');
    assert.equal(await present(t, '.tmp', `${sameNameElsewhere}-${NO_SUCH_PID}`), false, 'an idle temporary folder of another machine');
    assert.equal(await present(t, 'uploads', '102-bb'), false, 'a fresh lease of a dead process here');
  });
});
