/**
 * The load generator when wrk is missing: runs autocannon once and prints one JSON line
 * shaped like LoadResult (without tool/serverCpu).
 * Usage: node autocannon-driver.js URL CONNECTIONS SECONDS [PATHS_FILE]
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
// autocannon ships no types; only the few fields read below are used.
const autocannon = require('autocannon') as (opts: Record<string, unknown>) => Promise<any>;

const [url = '', connections = '50', seconds = '10', pathsFile] = process.argv.slice(2);
const paths = pathsFile === undefined ? undefined : readFileSync(pathsFile, 'utf8').split('\n').filter((l) => l !== '');

const result = await autocannon({
  url,
  connections: Number(connections),
  duration: Number(seconds),
  ...(paths === undefined
    ? {}
    : {
        requests: [
          {
            setupRequest: (req: { path: string }) => {
              req.path = paths[Math.floor(Math.random() * paths.length)] as string;
              return req;
            },
          },
        ],
      }),
});
const byStatus = (result.statusCodeStats ?? {}) as Record<string, { count: number | string }>;
let total = 0;
let unexpected = 0;
for (const [code, { count }] of Object.entries(byStatus)) {
  total += Number(count);
  if (!/^[23]/.test(code)) unexpected += Number(count);
}
process.stdout.write(
  `${JSON.stringify({
    rps: total / result.duration,
    p50: result.latency.p50,
    p90: result.latency.p90,
    p99: result.latency.p99,
    requests: total,
    errors: unexpected + Number(result.errors ?? 0),
  })}\n`,
);
