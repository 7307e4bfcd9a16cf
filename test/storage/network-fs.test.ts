/*
 * File storage on a network file system (docs/decisions.md, "File store: reads on the serving
 * thread, except on network file systems"): a store whose folder is on NFS, SMB, FUSE and the
 * like reads through the thread pool, so one file whose read waits on the network holds one pool
 * thread, not the server. A real FUSE mount (Debian's bindfs) stands in for the network: its
 * daemon stopped with SIGSTOP is a file server that stopped answering.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statfsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { remoteFileSystemName } from '../../src/storage/file-systems.js';
import { FsObjectStore } from '../../src/storage/index.js';
import { cliInProcess, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { logLines, startServe, type ServeProcess } from '../helpers/serve-process.js';

const R1 = '3a1f0c2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b';
const GROUP = 'e1e2e3e4-e5e6-4e7e-8e9e-eaebecedeeef';
const FUSE_TYPE = 0x65735546;

describe('file systems by their statfs type', () => {
  it('names network and user-space file systems, however the type number comes back', () => {
    assert.equal(remoteFileSystemName(0x6969), 'nfs');
    assert.equal(remoteFileSystemName(0xff534d42), 'cifs');
    // The same word read as a signed 32-bit number, and as a bigint.
    assert.equal(remoteFileSystemName(0xff534d42 - 2 ** 32), 'cifs');
    assert.equal(remoteFileSystemName(0xfe534d42n), 'smb2');
    assert.equal(remoteFileSystemName(FUSE_TYPE), 'fuse');
    assert.equal(remoteFileSystemName(0x00c36400), 'ceph');
  });

  it('takes local file systems as local: ext4, xfs, btrfs, tmpfs, overlayfs', () => {
    for (const type of [0xef53, 0x58465342, 0x9123683e, 0x01021994, 0x794c7630]) assert.equal(remoteFileSystemName(type), undefined, type.toString(16));
  });

  it('reads on the serving thread from a local folder, and through the pool when told', () => {
    const dir = path.join(process.cwd(), 'no-such-folder-yet', 'files');
    const local = new FsObjectStore(dir);
    assert.equal(local.remoteFileSystem, undefined);
    assert.equal(local.inlineReads, true);
    assert.equal(new FsObjectStore(dir, { reads: 'pool' }).inlineReads, false);
    assert.equal(new FsObjectStore(dir, { reads: 'pool' }).fastReads, undefined);
  });
});

const bindfs = ['/usr/bin/bindfs', '/bin/bindfs'].find((p) => existsSync(p));
const fuseUnavailable =
  process.platform !== 'linux'
    ? 'FUSE mounts need Linux'
    : bindfs === undefined
      ? 'needs Debian\'s bindfs (apt-get install bindfs; .ci/run installs it)'
      : !existsSync('/dev/fuse')
        ? 'needs /dev/fuse'
        : undefined;

interface Mount {
  daemon: ChildProcess;
  point: string;
  /** Stops the daemon (every call on the mount then waits), or lets it go on. */
  pause(): void;
  resume(): void;
  unmount(): Promise<void>;
}

/** `source` mounted at `point` by bindfs in the foreground (its pid is ours to stop). */
async function mountBindfs(source: string, point: string): Promise<Mount> {
  const daemon = spawn(bindfs as string, ['-f', source, point], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  daemon.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  const deadline = Date.now() + 10_000;
  while (statfsSync(point).type !== FUSE_TYPE) {
    if (daemon.exitCode !== null || Date.now() > deadline) throw new Error(`bindfs did not mount ${point} (exit ${daemon.exitCode}): ${err}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const exited = new Promise<void>((resolve) => daemon.once('exit', () => resolve()));
  return {
    daemon,
    point,
    pause: () => daemon.kill('SIGSTOP'),
    resume: () => daemon.kill('SIGCONT'),
    async unmount() {
      daemon.kill('SIGCONT');
      if (spawnSync('fusermount', ['-u', point]).status !== 0) spawnSync('umount', ['-l', point]);
      const force = setTimeout(() => daemon.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(force);
    },
  };
}

/** The threads of process `pid` waiting for an answer of a FUSE daemon (the kernel's wait, as /proc shows it). */
function fuseWaiters(pid: number): number[] {
  const waiting: number[] = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      if (readFileSync(`/proc/${pid}/task/${tid}/wchan`, 'utf8') === 'request_wait_answer') waiting.push(Number(tid));
    } catch {
      // A thread that ended meanwhile.
    }
  }
  return waiting;
}

/** Waits until a thread of the process waits on the stopped mount; returns those threads. */
async function untilWaitingOnMount(pid: number): Promise<number[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const waiting = fuseWaiters(pid);
    if (waiting.length > 0) return waiting;
    if (Date.now() > deadline) throw new Error('no thread of the server came to wait on the stopped mount');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Whether GET url answers (with its status) within ms, or undefined when it does not. */
async function answersWithin(url: string, ms: number): Promise<number | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(ms) });
    await res.arrayBuffer();
    return res.status;
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') return undefined;
    throw err;
  }
}

describe('file storage on a FUSE mount whose daemon stops answering', { skip: fuseUnavailable }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  after(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  /** A data folder whose files/ is a bindfs mount of files-source/, holding one release with one image; `sleeve serve` on it. */
  async function setUp(extra: Record<string, string>): Promise<{ t: TestEnv; mount: Mount; server: ServeProcess; thumbs: string[]; source: string }> {
    const t = await makeTestEnv({ SLEEVE_LOG_LEVEL: 'info', ...extra });
    cleanups.push(() => t.cleanup());
    const source = path.join(t.dir, 'files-source');
    const point = path.join(t.dir, 'files');
    await mkdir(source);
    await mkdir(point);
    const mount = await mountBindfs(source, point);
    cleanups.push(() => mount.unmount());
    await cliInProcess(t.env, ['release', 'add', R1, '--release-group', GROUP, '--title', 'On the network']);
    const image = path.join(t.dir, 'front.jpg');
    await writeFile(image, await makeJpeg(1400, 1400));
    const entry = await cliInProcess(t.env, ['--json', 'art', 'add', R1, image, '--approved', '--type', 'Front']);
    const id = entry.id as string;
    const thumbs = [250, 500, 1200].map((size) => `mbid-${R1}/mbid-${R1}-${id}_thumb${size}.jpg`);
    const server = await startServe(t.env, ['--only', 'coverart']);
    cleanups.push(async () => {
      mount.resume();
      await server.stop();
    });
    return { t, mount, server, thumbs, source };
  }

  it('by default, reads through the pool: a stalled read holds its own request, and the server answers others', async () => {
    const { mount, server, thumbs, source } = await setUp({});
    const said = logLines(server).find((l) => l.msg.startsWith('file storage is on a network file system'));
    assert.equal(said?.fileSystem, 'fuse', server.stdout());

    const first = await fetch(`${server.base}/download/${thumbs[0]}`);
    assert.equal(first.status, 200);
    assert.ok(Buffer.from(await first.arrayBuffer()).equals(await readFile(path.join(source, thumbs[0] as string))));

    mount.pause();
    // A file not read before, so neither cache has it: its read waits on the stopped daemon.
    const stalled = fetch(`${server.base}/download/${thumbs[1]}`);
    // The read has begun, on a thread of the pool: not on the server's own (its tid is its pid).
    const pid = server.child.pid as number;
    assert.equal((await untilWaitingOnMount(pid)).includes(pid), false);
    assert.equal(await answersWithin(`${server.base}/healthz`, 10_000), 200, 'the server must keep answering while one read waits');
    assert.equal(await answersWithin(`${server.base}/download/${thumbs[0]}`, 10_000), 200, 'a file in memory must still be served');
    mount.resume();
    const late = await stalled;
    assert.equal(late.status, 200);
    assert.ok(Buffer.from(await late.arrayBuffer()).equals(await readFile(path.join(source, thumbs[1] as string))));
  });

  it('with SLEEVE_STORAGE_READS=inline, the same stalled read stops the whole server until the daemon goes on', async () => {
    const { mount, server, thumbs } = await setUp({ SLEEVE_STORAGE_READS: 'inline' });
    assert.equal(
      logLines(server).some((l) => l.msg.startsWith('file storage is on a network file system')),
      false,
    );
    assert.equal(await answersWithin(`${server.base}/healthz`, 10_000), 200);
    mount.pause();
    const stalled = fetch(`${server.base}/download/${thumbs[2]}`);
    // The read has begun, on the server's own thread (after the catalogue's question, which on PostgreSQL is a round trip).
    const pid = server.child.pid as number;
    assert.deepEqual(await untilWaitingOnMount(pid), [pid]);
    // Not an answer that is late: none can come while the event loop waits in read(2).
    assert.equal(await answersWithin(`${server.base}/healthz`, 1_500), undefined, 'an inline read on a stopped mount blocks the event loop');
    mount.resume();
    assert.equal((await stalled).status, 200);
    assert.equal(await answersWithin(`${server.base}/healthz`, 10_000), 200);
  });
});
