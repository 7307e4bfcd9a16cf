import type { ChangeAnnouncer } from './notify.js';

/**
 * Tells serving processes through Redis that the catalogue changed. The change is already
 * committed, so failing here does not fail the command: the processes' database poll sees
 * it anyway, later; stderr says so.
 */
export async function announceChange(announcer: ChangeAnnouncer, pollRedisMs: number, version: number): Promise<void> {
  try {
    await announcer.announce(version);
  } catch (err) {
    process.stderr.write(
      `sleeve: warning: could not announce the change to serving processes (${(err as Error).message}); ` +
        `they will see it at their next database poll (within SLEEVE_CHANGE_POLL_REDIS_MS, ${pollRedisMs} ms)\n`,
    );
  }
}
