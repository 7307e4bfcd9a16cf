/*
 * Failpoints: places where a test can stop a real CLI process to kill it there (SIGKILL)
 * or let it go on (SIGUSR2), so that interrupted work is tested at exact points rather
 * than by timing. Only `SLEEVE_TEST_FAILPOINT=NAME` in the environment turns one on;
 * otherwise each is a comparison and nothing else.
 */

/** Whether the named failpoint is on in this process. */
export function failpointOn(name: string): boolean {
  return process.env.SLEEVE_TEST_FAILPOINT === name;
}

/** When on: says so on stderr (`sleeve: failpoint NAME DETAIL`), then waits for SIGUSR2. */
export async function failpoint(name: string, detail = ''): Promise<void> {
  if (!failpointOn(name)) return;
  const keepAlive = setInterval(() => {}, 60_000);
  const resumed = new Promise<void>((resolve) => process.once('SIGUSR2', () => resolve()));
  process.stderr.write(`sleeve: failpoint ${name}${detail === '' ? '' : ` ${detail}`}\n`);
  await resumed;
  clearInterval(keepAlive);
}
