/*
 * Several `sleeve serve` processes on one database, one bucket (s3rver) and one (private) Redis,
 * as behind a load balancer: health and readiness on both listeners; a change made through
 * the CLI shows through every process, measured from its commit against the documented
 * bound; the rate limit is one budget across processes; and Redis going away and coming
 * back (answers stay right, the limit and the freshness fall back as documented, and
 * everything recovers without restarting sleeve).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it, type TestContext } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { readCounter } from '../../src/cover-art/index.js';
import { openDatabase } from '../../src/db/connect.js';
import { request } from '../helpers/auth.js';
import { cliOk, DIALECT, makeTestEnv, pollUntil, runCli, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { redisUnavailable, startRedis, type PrivateRedis } from '../helpers/redis.js';
import { startS3, type S3TestServer } from '../helpers/s3.js';
import { logLines, startServe, type ServeProcess } from '../helpers/serve-process.js';

const G = 'c1a50000-0000-4000-8000-0000000000aa';
const UNKNOWN = '00000000-0000-4000-8000-000000000000';
const release = (n: number) => `c1a50000-0000-4000-8000-${String(n).padStart(12, '0')}`;
/*
 * The safety-net poll is 60 s here (SLEEVE_CHANGE_POLL_REDIS_MS), so a change seen well within
 * that was announced through Redis, and with Redis away, one seen well within it came from the
 * fallback poll every SLEEVE_CHANGE_POLL_MS (250 ms). The bounds tell those paths from the 60 s
 * poll with room for a loaded machine (a run at a load average of 7 saw 1.16 s for an
 * announcement); how soon each path is, typically, the diagnostics print and
 * docs/several-processes.md records.
 */
const ANNOUNCED_BOUND_MS = 10_000;
const POLL_BOUND_MS = 10_000;
const LIMIT = 6;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe(`several sleeve serve processes on one database, storage and Redis (${DIALECT})`, { skip: redisUnavailable() }, () => {
  let t: TestEnv;
  let redis: PrivateRedis;
  let s3: S3TestServer;
  let a: ServeProcess;
  let b: ServeProcess;
  let clients = 0;
  /** A new client address (X-Forwarded-For from the trusted 127.0.0.1), so probes do not eat a test's rate budget. */
  const freshClient = () => {
    clients++;
    return `10.${(clients >> 16) & 255}.${(clients >> 8) & 255}.${clients & 255}`;
  };

  /** Status and Location of a GET of `p` through process `s`, from a fresh client. */
  async function probe(s: ServeProcess, p: string): Promise<string> {
    const res = await fetch(`${s.base}${p}`, { redirect: 'manual', headers: { 'x-forwarded-for': freshClient() } });
    await res.arrayBuffer();
    return `${res.status} ${res.headers.get('location') ?? ''}`.trim();
  }

  async function readyz(base: string): Promise<{ status: number; body: any; cacheControl: string | null }> {
    const res = await fetch(`${base}/readyz`);
    return { status: res.status, body: await res.json(), cacheControl: res.headers.get('cache-control') };
  }

  async function image(name: string): Promise<string> {
    const file = path.join(t.dir, `${name}.jpg`);
    await writeFile(file, await makeJpeg(120, 120));
    return file;
  }

  /**
   * Runs `change` (a CLI command) while watching the catalogue version in the database and
   * `path` through each process: returns, per process, the ms from the commit (the version
   * moving) to the first answer other than `stale`.
   */
  async function visibility(change: () => Promise<void>, urlPath: string, stale: string, timeoutMs: number): Promise<number[]> {
    const handle = await openDatabase(loadConfig(t.env).database);
    try {
      const from = await readCounter(handle.db, 'catalogue_version');
      let committedAt: number | undefined;
      const seenAt: (number | undefined)[] = [undefined, undefined];
      let stop = false;
      const watchCommit = (async () => {
        while (!stop && committedAt === undefined) {
          if ((await readCounter(handle.db, 'catalogue_version')) !== from) committedAt = performance.now();
          else await sleep(2);
        }
      })();
      const watchers = [a, b].map(async (s, i) => {
        while (!stop && seenAt[i] === undefined) {
          if ((await probe(s, urlPath)) !== stale) seenAt[i] = performance.now();
          else await sleep(2);
        }
      });
      try {
        await change();
      } catch (err) {
        stop = true;
        throw err;
      }
      const deadline = setTimeout(() => (stop = true), timeoutMs + 5000);
      await Promise.all([watchCommit, ...watchers]);
      clearTimeout(deadline);
      stop = true;
      assert.ok(committedAt !== undefined, 'the change committed');
      return seenAt.map((at, i) => {
        assert.ok(at !== undefined, `process ${i === 0 ? 'a' : 'b'} never showed the change`);
        return Math.round(at - (committedAt as number));
      });
    } finally {
      await handle.close();
    }
  }

  before(async () => {
    redis = await startRedis();
    t = await makeTestEnv({
      SLEEVE_REDIS_URL: redis.url,
      SLEEVE_RATE_LIMIT: `${LIMIT}/10s`,
      SLEEVE_TRUST_PROXY: '127.0.0.1',
      SLEEVE_CHANGE_POLL_MS: '250',
      // The tests read the processes' info logs (Redis connected again).
      SLEEVE_LOG_LEVEL: 'info',
      // Announcements alone must make changes visible quickly: the safety-net poll is set far out.
      SLEEVE_CHANGE_POLL_REDIS_MS: '60000',
    });
    // Every process and the CLI share one bucket (s3rver); redirects then point at the bucket itself.
    s3 = await startS3();
    Object.assign(t.env, s3.env);
    await cliOk(t.env, ['release', 'add', release(1), '--release-group', G]);
    // One after the other: the first start generates the auth listener's certificate in the shared data directory.
    a = await startServe(t.env);
    b = await startServe(t.env);
    for (const s of [a, b]) {
      const { value } = await pollUntil(() => readyz(s.base), (v) => v.body.status === 'ok', 10_000);
      assert.equal(value.body.status, 'ok', JSON.stringify(value.body));
    }
  });

  after(async () => {
    const codes = await Promise.all([a, b].map((s) => s?.stop()));
    await redis?.destroy();
    await s3?.close();
    await t?.cleanup();
    assert.deepEqual(codes, [0, 0], 'both processes stopped cleanly');
  });

  it('answers /healthz and /readyz on both listeners of every process, outside the API', async () => {
    for (const s of [a, b]) {
      const live = await fetch(`${s.base}/healthz`);
      assert.equal(live.status, 200);
      assert.equal(live.headers.get('content-type'), 'application/json; charset=utf-8');
      assert.equal(live.headers.get('cache-control'), 'no-store');
      assert.deepEqual(await live.json(), { status: 'ok' });

      const ready = await readyz(s.base);
      assert.equal(ready.status, 200);
      assert.equal(ready.cacheControl, 'no-store');
      assert.deepEqual(ready.body, { status: 'ok', checks: { database: 'ok', storage: 'ok', redis: 'ok' } });

      const head = await fetch(`${s.base}/readyz`, { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(await head.text(), '');
      const post = await fetch(`${s.base}/healthz`, { method: 'POST' });
      assert.equal(post.status, 405);
      assert.equal(post.headers.get('allow'), 'GET, HEAD');
      await post.arrayBuffer();
      assert.equal((await fetch(`${s.base}/readyz?full=1`)).status, 200, 'a query string is ignored');

      // The auth listener: over HTTPS, and over plain HTTP (a probe carries nothing secret).
      const auth = await request(`${s.authBase}/readyz`);
      assert.equal(auth.status, 200);
      assert.deepEqual(auth.json(), { status: 'ok', checks: { database: 'ok' } });
      const plain = await fetch(`${s.authBase.replace('https:', 'http:')}/healthz`);
      assert.equal(plain.status, 200);
      assert.deepEqual(await plain.json(), { status: 'ok' });
      const notProbe = await fetch(`${s.authBase.replace('https:', 'http:')}/login`);
      assert.equal(notProbe.status, 400, 'everything else on the auth port still needs HTTPS');
      await notProbe.arrayBuffer();
    }
  });

  it('a change made through the CLI shows through both processes soon after its commit (announced through Redis)', async (ctx: TestContext) => {
    const front = `/release/${release(1)}/front`;
    // Both caches hold the 404 (asked twice: the second answer is the cached one).
    for (const s of [a, b]) for (let i = 0; i < 2; i++) assert.equal(await probe(s, front), '404');
    const file = await image('first');
    let added: any;
    const ms = await visibility(
      async () => {
        added = await cliOk(t.env, ['--json', 'art', 'add', release(1), file, '--type', 'Front']);
      },
      front,
      '404',
      ANNOUNCED_BOUND_MS,
    );
    ctx.diagnostic(`commit → visible, announced: a ${ms[0]} ms, b ${ms[1]} ms`);
    for (const m of ms) assert.ok(m <= ANNOUNCED_BOUND_MS, `visible ${m} ms after the commit (bound ${ANNOUNCED_BOUND_MS} ms)`);
    for (const s of [a, b]) {
      assert.equal(await probe(s, front), `307 ${s3.publicUrl}/mbid-${release(1)}/mbid-${release(1)}-${added.id}.jpg`);
      // The other process's upload, served by this one from the shared storage too (as for a private bucket).
      const img = await fetch(`${s.base}/download/mbid-${release(1)}/mbid-${release(1)}-${added.id}.jpg`);
      assert.equal(img.status, 200);
      assert.equal(img.headers.get('content-type'), 'image/jpeg');
      await img.arrayBuffer();
    }
  });

  it('the rate limit is one budget across the processes: over it, either process answers 503 with Retry-After', async () => {
    const client = '198.51.100.7';
    const ask = async (s: ServeProcess) => {
      const res = await fetch(`${s.base}/release/${UNKNOWN}/front`, { redirect: 'manual', headers: { 'x-forwarded-for': client } });
      await res.arrayBuffer();
      return res;
    };
    for (let i = 0; i < LIMIT; i++) assert.equal((await ask(i % 2 === 0 ? a : b)).status, 404, `request ${i + 1}`);
    for (const s of [a, b]) {
      const over = await ask(s);
      assert.equal(over.status, 503);
      const wait = Number(over.headers.get('retry-after'));
      assert.ok(Number.isInteger(wait) && wait >= 1 && wait <= 10, `Retry-After ${over.headers.get('retry-after')}`);
      assert.equal(over.headers.get('access-control-allow-origin'), '*');
    }
    // Counted atomically: of 40 requests sent at once through both processes, exactly the limit get through.
    const burst = '198.51.100.70';
    const statuses = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const res = await fetch(`${(i % 2 === 0 ? a : b).base}/release/${UNKNOWN}/front`, { redirect: 'manual', headers: { 'x-forwarded-for': burst } });
        await res.arrayBuffer();
        return res.status;
      }),
    );
    assert.equal(statuses.filter((x) => x === 404).length, LIMIT, statuses.join(' '));
    assert.equal(statuses.filter((x) => x === 503).length, 40 - LIMIT);
    // Probes are neither counted nor refused.
    const ready = await fetch(`${a.base}/readyz`, { headers: { 'x-forwarded-for': client } });
    assert.equal(ready.status, 200);
    await ready.arrayBuffer();
    const key = await redis.command(`PTTL sleeve:rate:${client}`);
    assert.match(key, /^:\d+\r\n$/, 'the count lives in Redis with its window as expiry');
  });

  it('Redis going away: right answers, the limit counted per process, changes shown within the poll bound, clear logs; all recover when it returns', async (ctx: TestContext) => {
    await redis.stop();
    for (const s of [a, b]) {
      const { value } = await pollUntil(() => readyz(s.base), (v) => v.body.status === 'degraded', 5000);
      assert.equal(value.status, 200, 'still ready: sleeve answers correctly without Redis');
      assert.deepEqual(value.body, { status: 'degraded', checks: { database: 'ok', storage: 'ok', redis: 'failing' } });
      const logged = logLines(s).filter((l) => /^Redis unavailable/.test(l.msg));
      assert.ok(logged.some((l) => l.level === 40 && l.role === 'notifications' && /database poll/.test(l.msg)), JSON.stringify(logged));
      assert.ok(logged.some((l) => l.level === 40 && l.role === 'commands' && /counted by each process alone/.test(l.msg)), JSON.stringify(logged));
    }

    // Cached answers are not trusted: a change made now shows within the poll bound.
    const front = `/release/${release(2)}/front`;
    await cliOk(t.env, ['release', 'add', release(2), '--release-group', G]);
    for (const s of [a, b]) for (let i = 0; i < 2; i++) assert.equal(await probe(s, front), '404');
    const file = await image('second');
    let cli: Awaited<ReturnType<typeof runCli>> | undefined;
    const ms = await visibility(
      async () => {
        cli = await runCli(t.env, ['--json', 'art', 'add', release(2), file, '--type', 'Front']);
      },
      front,
      '404',
      POLL_BOUND_MS,
    );
    ctx.diagnostic(`commit → visible, Redis away (poll every 250 ms): a ${ms[0]} ms, b ${ms[1]} ms`);
    assert.equal(cli?.code, 0, 'the CLI change succeeds without Redis');
    assert.match(cli?.stderr ?? '', /^sleeve: warning: could not announce the change to serving processes \(Redis at redis:\/\/127\.0\.0\.1:\d+\/0: .+\); they will see it at their next database poll/m);
    for (const m of ms) assert.ok(m <= POLL_BOUND_MS, `visible ${m} ms after the commit (bound ${POLL_BOUND_MS} ms)`);

    // The limit: each process counts alone, with the same limit.
    const client = '198.51.100.8';
    const ask = async (s: ServeProcess) => {
      const res = await fetch(`${s.base}/release/${UNKNOWN}/front`, { redirect: 'manual', headers: { 'x-forwarded-for': client } });
      await res.arrayBuffer();
      return res.status;
    };
    for (let i = 0; i < LIMIT; i++) assert.equal(await ask(a), 404);
    assert.equal(await ask(a), 503, 'process a counts the client alone');
    for (let i = 0; i < LIMIT; i++) assert.equal(await ask(b), 404, 'process b has its own count meanwhile');
    assert.equal(await ask(b), 503);

    // A process started meanwhile starts (degraded) rather than refusing to.
    const c = await startServe(t.env);
    const late = await readyz(c.base);
    assert.deepEqual(late.body, { status: 'degraded', checks: { database: 'ok', storage: 'ok', redis: 'failing' } });
    const startWarnings = logLines(c).filter((l) => l.level === 40 && /^Redis unavailable/.test(l.msg));
    assert.ok(startWarnings.some((l) => l.reason === 'ECONNREFUSED'), JSON.stringify(startWarnings));
    assert.equal(await probe(c, front), `307 ${s3.publicUrl}/mbid-${release(2)}/mbid-${release(2)}-${JSON.parse(cli?.stdout ?? '{}').id}.jpg`);

    // Redis returns (empty): every process reconnects and subscribes again by itself.
    await redis.start();
    const cReady = await pollUntil(() => readyz(c.base), (v) => v.body.status === 'ok', 10_000);
    assert.equal(cReady.value.body.status, 'ok', 'the process started without Redis uses it once it is there');
    assert.equal(await c.stop(), 0);
    for (const s of [a, b]) {
      const { value } = await pollUntil(() => readyz(s.base), (v) => v.body.status === 'ok', 10_000);
      assert.deepEqual(value.body, { status: 'ok', checks: { database: 'ok', storage: 'ok', redis: 'ok' } });
      const back = logLines(s).filter((l) => /^Redis connected/.test(l.msg)).map((l) => l.role);
      assert.ok(back.includes('commands') && back.includes('notifications'), JSON.stringify(back));
    }
    // One budget again.
    const shared = '198.51.100.9';
    const askShared = async (s: ServeProcess) => {
      const res = await fetch(`${s.base}/release/${UNKNOWN}/front`, { redirect: 'manual', headers: { 'x-forwarded-for': shared } });
      await res.arrayBuffer();
      return res.status;
    };
    for (let i = 0; i < LIMIT; i++) assert.equal(await askShared(i % 2 === 0 ? b : a), 404);
    assert.equal(await askShared(a), 503);
    assert.equal(await askShared(b), 503);
    // Announcements again (the poll is back to every 60 s).
    const back = `/release/${release(2)}/back`;
    for (const s of [a, b]) for (let i = 0; i < 2; i++) assert.equal(await probe(s, back), '404');
    const third = await image('third');
    const again = await visibility(
      async () => {
        const r = await runCli(t.env, ['art', 'add', release(2), third, '--type', 'Back']);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stderr, '', 'no warning: the change was announced');
      },
      back,
      '404',
      ANNOUNCED_BOUND_MS,
    );
    ctx.diagnostic(`commit → visible, Redis back: a ${again[0]} ms, b ${again[1]} ms`);
    for (const m of again) assert.ok(m <= ANNOUNCED_BOUND_MS, `visible ${m} ms after the commit (bound ${ANNOUNCED_BOUND_MS} ms)`);
  });

  it('a Redis that stops answering (SIGSTOP) holds no request: the limit falls back after the command timeout', async () => {
    /** Rate-limit scripts Redis has run so far (each command sent reaches it, even one sent while it was stopped). */
    const scriptsRun = async () => {
      let n = 0;
      // `calls` counts those that failed in Redis too; `rejected_calls` those refused before running.
      for (const m of (await redis.command('INFO commandstats')).matchAll(/cmdstat_eval(?:sha)?:calls=(\d+),.*?rejected_calls=(\d+)/g)) {
        n += Number(m[1]) + Number(m[2]);
      }
      return n;
    };
    const pid = Number(/process_id:(\d+)/.exec(await redis.command('INFO server'))?.[1]);
    assert.ok(pid > 0);
    // Process a relies on Redis to begin with (a slow answer in the test before may have left it
    // not trusting it for a second), and what it logs from here on is this test's.
    const { value: trusted } = await pollUntil(() => readyz(a.base), (v) => v.body.status === 'ok', 10_000);
    assert.equal(trusted.body.status, 'ok', JSON.stringify(trusted.body));
    const logged = logLines(a).length;
    const before = await scriptsRun();
    execFileSync('kill', ['-STOP', String(pid)]);
    try {
      const client = '198.51.100.10';
      // Each answered, none held: the first after the command timeout (250 ms), the others at once.
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${a.base}/release/${UNKNOWN}/front`, { redirect: 'manual', headers: { 'x-forwarded-for': client }, signal: AbortSignal.timeout(5000) });
        await res.arrayBuffer();
        assert.equal(res.status, 404);
      }
      const warned = logLines(a)
        .slice(logged)
        .filter((l) => l.level === 40 && l.role === 'commands' && /^Redis unavailable/.test(l.msg));
      assert.ok(warned.some((l) => /timed out/i.test(String(l.reason))), JSON.stringify(warned));
      const { value } = await pollUntil(() => readyz(a.base), (v) => v.body.status === 'degraded', 8000);
      assert.equal(value.body.checks.redis, 'failing');
    } finally {
      execFileSync('kill', ['-CONT', String(pid)]);
    }
    for (const s of [a, b]) {
      const { value } = await pollUntil(() => readyz(s.base), (v) => v.body.status === 'ok', 10_000);
      assert.equal(value.body.status, 'ok', JSON.stringify(value.body));
    }
    // Process a is trusted again once a PING sent after those requests was answered, so Redis
    // has run whatever they sent: only the first request asked it; the three after it counted
    // in the process without waiting for Redis.
    assert.equal((await scriptsRun()) - before, 1);
  });
});
