/**
 * front-door: warm `GET /release/{mbid}/front` through deploy/nginx/musicbrainz-mirror.conf
 * (nginx terminating TLS for coverartarchive.org and proxying to sleeve's cover art listener)
 * against the same nginx server block answering `return 307` itself. nginx and sleeve share
 * the server core (the front door's whole cost on one core), the load generator (wrk over
 * HTTPS, keep-alive, Host: coverartarchive.org) the other; rounds interleaved, medians.
 * References: the front door with the recipe's micro-cache off (its proxying alone), and sleeve
 * alone over plain HTTP on the same core.
 * Goal: front door / nginx's own 307 ≥ 0.5 in requests/s.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { freePort, NGINX, nginxMain, startNginx } from './lib/nginx.js';
import type { Options } from './lib/options.js';
import { ROOT, SLEEVE_CLI } from './lib/paths.js';
import { cleanEnv, runOk, type Server } from './lib/proc.js';
import { describeRounds, interleavedRounds, mediansTable, runsTable, seriesSummary, type Target } from './lib/rounds.js';
import { expect307, LOAD_CORE, SERVER_CORE, startSleeve } from './lib/servers.js';
import { fmtMs, fmtRatio, passFail } from './lib/stats.js';
import { makeCatalogue, RELEASE } from './redirect.js';

const GOAL_RATIO = 0.5;
const HOST = 'coverartarchive.org';
const RECIPE = path.join(ROOT, 'deploy', 'nginx', 'musicbrainz-mirror.conf');

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/**
 * The recipe as shipped, with only what names this machine changed: the TLS folder, the
 * upstreams' ports, and the listen lines (one port on 127.0.0.1; wrk speaks HTTP/1.1). With
 * `answer307`, the cover art server's `proxy_pass` becomes nginx's own `return 307`.
 */
function recipe(opts: { prefix: string; tlsDir: string; port: number; sleevePort: number; answer307?: string; noCache?: boolean }): string {
  let conf = readFileSync(RECIPE, 'utf8');
  const swaps: [string, string][] = [
    ['/var/lib/sleeve/tls/', `${opts.tlsDir}/`],
    ['server 127.0.0.1:8080;', `server 127.0.0.1:${opts.sleevePort};`],
    // Neither is contacted: the load asks the cover art server only.
    ['server 127.0.0.1:8443;', 'server 127.0.0.1:9;'],
    ['server musicbrainz:5000;', 'server 127.0.0.1:9;'],
    ['/var/lib/nginx/sleeve-cache', path.join(opts.prefix, 'sleeve-cache')],
    ['listen 443 ssl http2;', `listen 127.0.0.1:${opts.port} ssl;`],
    ['listen [::]:443 ssl http2;', ''],
  ];
  if (opts.answer307 !== undefined) swaps.push(['proxy_pass http://sleeve_coverart;', `return 307 ${opts.answer307};`]);
  // The recipe's proxying alone: its micro-cache off.
  if (opts.noCache === true) swaps.push(['proxy_cache sleeve_api;', '']);
  for (const [from, to] of swaps) {
    if (!conf.includes(from)) throw new Error(`front-door: ${RECIPE} no longer has ${JSON.stringify(from)}; update bench/front-door.ts`);
    conf = conf.split(from).join(to);
  }
  return conf;
}

/** GET `urlPath` over HTTPS as a client of coverartarchive.org would (SNI, Host, the local CA); must be a 307 to `location`. */
function expectTls307(server: Server, urlPath: string, ca: Buffer, location: string): Promise<void> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = https.get({ host: url.hostname, port: url.port, path: urlPath, servername: HOST, headers: { host: HOST }, ca }, (res) => {
      res.resume();
      if (res.statusCode !== 307) reject(new Error(`${server.name}: GET ${urlPath} answered ${res.statusCode}, not 307`));
      else if (res.headers.location !== location) reject(new Error(`${server.name}: Location ${res.headers.location}, not ${location}`));
      else resolve();
    });
    req.on('error', reject);
  });
}

/** Two servers as one target: CPU summed, both stopped. */
function both(front: Server, back: Server): Server {
  return { ...front, name: `${front.name}+${back.name}`, cpuSeconds: () => front.cpuSeconds() + back.cpuSeconds(), stop: async () => void (await Promise.all([front.stop(), back.stop()])) };
}

export async function frontDoorBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  if (!existsSync(NGINX)) throw new Error(`front-door: ${NGINX} is missing; install Debian's nginx (apt-get install nginx)`);
  const durationS = opts.duration ?? 8;
  const rounds = opts.rounds ?? 5;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-front-door-'));
  const prefix = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-front-door-nginx-'));
  try {
    await makeCatalogue(dataDir);
    await runOk(process.execPath, [SLEEVE_CLI, 'tls', 'init', '--name', 'musicbrainz.lan', '--name', HOST, '--name', 'eventartarchive.org'], { env: cleanEnv({ SLEEVE_DATA_DIR: dataDir }) });
    const tlsDir = path.join(dataDir, 'tls');
    const ca = readFileSync(path.join(tlsDir, 'ca.crt'));
    const urlPath = `/release/${RELEASE}/front`;
    // As the recipe says to start it: public URLs, the proxy trusted.
    const sleeveSettings = { SLEEVE_BASE_URL: `https://${HOST}`, SLEEVE_MUSICBRAINZ_URL: 'https://musicbrainz.lan', SLEEVE_TRUST_PROXY: '127.0.0.1' };
    const startBehind = () => startSleeve({ name: 'sleeve', dataDir, only: 'coverart', env: sleeveSettings, cpuProf: opts.cpuProf });
    const probe = await startBehind();
    let location: string;
    try {
      location = (await expect307(probe, urlPath)).location;
    } finally {
      await probe.stop();
    }
    log(`front-door: sleeve answers ${urlPath} with 307 → ${location}`);
    const check = (server: Server) => expectTls307(server, urlPath, ca, location);
    const frontDoor = async (noCache: boolean): Promise<Server> => {
      const sleeve = await startBehind();
      try {
        const port = await freePort();
        const sleevePort = Number(new URL(sleeve.url).port);
        const nginx = await startNginx({ prefix, port, scheme: 'https', name: 'nginx-front', conf: nginxMain(prefix, recipe({ prefix, tlsDir, port, sleevePort, noCache })) });
        return both(nginx, sleeve);
      } catch (err) {
        await sleeve.stop();
        throw err;
      }
    };
    const headers = { Host: HOST };
    const targets: Target[] = [
      {
        label: "nginx's own return 307 (TLS)",
        start: async () => {
          const port = await freePort();
          return startNginx({ prefix, port, scheme: 'https', name: 'nginx-307', conf: nginxMain(prefix, recipe({ prefix, tlsDir, port, sleevePort: 9, answer307: location })) });
        },
        check,
        path: urlPath,
        headers,
      },
      { label: 'front door: nginx (TLS) → sleeve', start: () => frontDoor(false), check, path: urlPath, headers },
      { label: 'front door, micro-cache off', start: () => frontDoor(true), check, path: urlPath, headers },
      { label: 'sleeve alone (plain HTTP, ref.)', start: startBehind, check: async (s) => void (await expect307(s, urlPath)), path: urlPath },
    ];
    const settings = { durationS, rounds, warmupS: opts.warmup, connections: opts.connections, loadCore: LOAD_CORE, freshProcess: !opts.sameProcess };
    const series = await interleavedRounds(targets, settings);
    const [n, f, u, s] = series.map(seriesSummary) as [Summary, Summary, Summary, Summary];
    const ratio = f.rps.median / n.rps.median;
    const ok = ratio >= GOAL_RATIO;
    const markdown = [
      '### front-door: GET /release/{mbid}/front through deploy/nginx/musicbrainz-mirror.conf vs nginx\'s own 307',
      '',
      `nginx ${NGINX} (one process) runs the recipe as shipped but for the machine's names (TLS folder, ports; wrk sends Host: ${HOST}); in the front door it proxies to \`sleeve serve --only coverart\` (started as \`npm start\` starts it, SQLite + files, SLEEVE_TRUST_PROXY=127.0.0.1); both on CPU ${SERVER_CORE}, so the front door's whole cost shares one core. The baseline is the same server block with \`return 307\` to sleeve's Location. ${describeRounds(settings, f.runs[0]?.tool)}.`,
      '',
      runsTable(series),
      '',
      mediansTable(series),
      '',
      `- front door / nginx's own 307, requests/s (ratio of medians): **${fmtRatio(ratio)}** (goal ≥ ${GOAL_RATIO}): **${passFail(ok)}**; per round ${f.runs.map((x, i) => fmtRatio(x.rps / (n.runs[i]?.rps ?? Number.NaN))).join(', ')}`,
      `- the recipe's proxying alone (micro-cache off): ${fmtRatio(u.rps.median / n.rps.median)} of nginx's own 307 (CPU per request: nginx's 307 ${cpuUs(n)}, the front door ${cpuUs(f)}, without its micro-cache ${cpuUs(u)}, sleeve alone ${cpuUs(s)})`,
      `- p99: nginx ${fmtMs(n.p99.median)}, front door ${fmtMs(f.p99.median)}, without its micro-cache ${fmtMs(u.p99.median)}, sleeve alone over HTTP ${fmtMs(s.p99.median)}; sleeve alone reaches ${fmtRatio(s.rps.median / n.rps.median)} of nginx's TLS 307`,
    ].join('\n');
    return { markdown, data: { settings, location, nginx: n, frontDoor: f, uncached: u, sleeve: s, ratio, ok }, goalsMet: ok };
  } finally {
    if (!opts.keep) await Promise.all([rm(dataDir, { recursive: true, force: true }), rm(prefix, { recursive: true, force: true })]);
  }
}

type Summary = ReturnType<typeof seriesSummary>;

/** Server CPU per request (every process of the target), in µs. */
function cpuUs(x: Summary): string {
  return `${((x.serverCpu / 100 / x.rps.median) * 1e6).toFixed(1)} µs`;
}
