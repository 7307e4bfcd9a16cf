/**
 * Runs `work` for `key` unless a run for it is under way, in which case its promise is shared:
 * concurrent callers for one key get one run. The key is forgotten when the run settles.
 */
export function singleFlight<K, T>(runs: Map<K, Promise<T>>, key: K, work: () => Promise<T>): Promise<T> {
  let run = runs.get(key);
  if (run === undefined) {
    run = work().finally(() => runs.delete(key));
    runs.set(key, run);
  }
  return run;
}
