/*
 * The worker thread behind cliInProcess (env.ts): runs `sleeve` commands with the CLI's
 * `main`, one at a time, each with the environment, standard input and output it is given.
 * A thread of its own, so that a command waiting on SQLite's lock (a synchronous wait) never
 * stops the test's own thread, where an in-process server may hold that lock.
 */
import { parentPort } from 'node:worker_threads';
import { main } from '../../src/cli/main.js';

export interface CliJob {
  id: number;
  args: string[];
  env: Record<string, string>;
  stdin: Uint8Array;
}

export interface CliDone {
  id: number;
  code: number;
  stdout: string;
  stderr: string;
}

parentPort?.on('message', async (job: CliJob) => {
  let stdout = '';
  let stderr = '';
  const code = await main(job.args, {
    env: job.env,
    stdin: (async function* () {
      yield Buffer.from(job.stdin);
    })(),
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  });
  parentPort?.postMessage({ id: job.id, code, stdout, stderr } satisfies CliDone);
});
