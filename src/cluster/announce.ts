import type { ChangeAnnouncer } from './notify.js';

/**
 * Tells serving processes through Redis that the catalogue changed. The change is already
 * committed, so failing here does not fail the command: the processes' database poll sees
 * it anyway, later; `warn` says so.
 */
export async function announceChange(announcer: ChangeAnnouncer, pollRedisMs: number, version: number, warn: (message: string) => void): Promise<void> {
  try {
    await announcer.announce(version);
  } catch (err) {
    warn(
      `could not announce the change to serving processes (${(err as Error).message}); ` +
        `they will see it at their next database poll (within SLEEVE_CHANGE_POLL_REDIS_MS, ${pollRedisMs} ms)`,
    );
  }
}
