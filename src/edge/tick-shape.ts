import { createHook } from 'node:async_hooks';

/**
 * Keeps one of Node's own `process.nextTick` entries alive for the life of the process.
 *
 * Why: Node 20 builds each nextTick entry with an object literal whose first two keys are
 * computed (`{ [async_id_symbol]: …, [trigger_async_id_symbol]: …, callback, args }`). V8
 * defines such keys one by one through inline caches that hold the intermediate hidden
 * classes ("maps") only weakly. When a full garbage collection runs while no entry is
 * alive, those maps are collected; the next entry makes new ones, and after a few such
 * collections the caches give up (megamorphic) and every nextTick goes through the
 * runtime. Start-up runs several full collections, so whether a process ends up there is
 * a matter of luck: measured on this project's cached 307, about 30 % fewer requests per
 * second in the processes that did (an HTTP request makes several nextTick entries).
 * One entry that never dies keeps its maps, and so the caches, stable.
 *
 * The entry is caught with an async hook enabled only around one nextTick call; it
 * reaches nothing but an empty function. Call this as early as possible.
 */
let kept: object | undefined;

export function keepTickShape(): void {
  if (kept !== undefined) return;
  const hook = createHook({
    init(_id, type, _trigger, resource: object) {
      if (type === 'TickObject') kept = resource;
    },
  });
  hook.enable();
  try {
    process.nextTick(() => {});
  } finally {
    hook.disable();
  }
}
