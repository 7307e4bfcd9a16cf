import { hostname } from 'node:os';

/** Whether a process with this id runs on this machine (another user's counts). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** This machine's name, reduced to letters, digits, '.', '_' and '-' so it can be part of a file or key name. */
export function hostTag(): string {
  return (hostname().replace(/[^A-Za-z0-9._-]/g, '_').replace(/^[._-]+/, '') || 'host').slice(0, 64);
}
