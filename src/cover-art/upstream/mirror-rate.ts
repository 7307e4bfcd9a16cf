import type { Clock } from '../../shared/clock.js';

/** The bulk mirror's `--rate` (mirror.ts): a token bucket, at most `rate` takes per second, with bursts of up to `burst`, timed by `clock`. */
export class RateLimit {
  private tokens: number;
  private last: number;

  constructor(
    private readonly rate: number,
    private readonly burst: number,
    private readonly clock: Clock,
  ) {
    this.tokens = burst;
    this.last = clock.now();
  }

  /** Milliseconds to wait before a take succeeds (0: taken now). */
  tryTake(): number {
    const now = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.rate) / 1000);
    this.last = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - this.tokens) * 1000) / this.rate);
  }

  /** Waits for a token; false when `signal` stopped the wait. */
  async take(signal: AbortSignal): Promise<boolean> {
    for (;;) {
      if (signal.aborted) return false;
      const wait = this.tryTake();
      if (wait === 0) return true;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, wait);
        function done() {
          clearTimeout(timer);
          signal.removeEventListener('abort', done);
          resolve();
        }
        signal.addEventListener('abort', done, { once: true });
      });
    }
  }
}
