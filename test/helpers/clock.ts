/*
 * Clocks a test moves, for servers started in this process (serve's `clock` option): time
 * passes for the server when the test says so, not by sleeping.
 */
import type { Clock } from '../../src/shared/clock.js';

/** Stands still at `start` (now, by default) until advanced: expiry happens exactly when the test says. */
export class ManualClock implements Clock {
  private at: number;

  constructor(start = Date.now()) {
    this.at = start;
  }

  now(): number {
    return this.at;
  }

  advance(ms: number): void {
    this.at += ms;
  }
}

/**
 * Real time plus what the test advanced it by: for servers that also wait on real things
 * (other processes, polling loops) while the test skips ahead over a lifetime or window.
 */
export class ShiftedClock implements Clock {
  private offset = 0;

  now(): number {
    return Date.now() + this.offset;
  }

  advance(ms: number): void {
    this.offset += ms;
  }
}
