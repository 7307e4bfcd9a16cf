/*
 * The thread the first whole read of the mirror runs on (bulk.ts, readWholeBulk): the serving
 * thread keeps answering while the import parses and applies millions of rows. It is given the
 * options as plain data and sends back its log lines and skipped rows, then the read or the error.
 */
import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import { readWholeHere, type BulkThreadInput, type BulkThreadMessage } from './bulk.js';

const input = workerData as BulkThreadInput;
const port = parentPort;
if (port === null) throw new Error('bulk-thread.ts runs as a worker thread');
const post = (m: BulkThreadMessage) => port.postMessage(m);

const stopping = new AbortController();
port.on('message', (m: unknown) => {
  if (m === 'abort') stopping.abort();
});

// The caller's clock, run on by this thread's own time (an injected clock is read once, at the start).
const t0 = performance.now();
const clock = { now: () => input.startedAt + Math.round(performance.now() - t0) };

const log = { info: (obj: object, msg: string) => post({ log: { obj, msg } }) };
const skip = (what: string, key: string) => post({ skip: { what, key } });
readWholeHere({ ...input.options, clock, log, skip, signal: stopping.signal }).then(
  (done) => post({ done }),
  (err: unknown) => {
    const e = err as { name?: unknown; message?: unknown; code?: unknown };
    post({ error: { name: String(e?.name ?? 'Error'), message: String(e?.message ?? err), code: typeof e?.code === 'string' ? e.code : undefined } });
  },
);
