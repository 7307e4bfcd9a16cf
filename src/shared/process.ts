import { readlinkSync } from 'node:fs';
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

let tag: string | undefined;

/**
 * The name of the place whose process ids this process can check: the machine's name, reduced
 * to letters, digits, '.', '_' and '-' so it can be part of a file or key name, and on Linux its
 * PID namespace. Two containers that share a volume may share a host name (and each have its own
 * process 1); with the namespace in the tag, each takes the other's leases and folders as
 * another machine's (judged by age), never as its own dead processes.
 */
export function hostTag(): string {
  tag ??= (hostname().replace(/[^A-Za-z0-9._-]/g, '_').replace(/^[._-]+/, '') || 'host').slice(0, 64) + pidNamespace();
  return tag;
}

function pidNamespace(): string {
  try {
    const inode = /^pid:\[(\d+)\]$/.exec(readlinkSync('/proc/self/ns/pid'))?.[1];
    return inode === undefined ? '' : `.pidns${inode}`;
  } catch {
    // Not Linux, or /proc not mounted: the host name alone.
    return '';
  }
}
