/*
 * Which file systems' calls may wait on a network or another process (NFS, SMB, FUSE, Ceph and
 * the like), by statfs(2)'s type number: a folder store on one reads through the thread pool
 * (fs-store.ts; docs/decisions.md, "File store: reads on the serving thread, except on network
 * file systems").
 */

/** statfs(2) f_type of file systems whose calls may wait on a network or another process (linux/magic.h). */
const REMOTE_FILE_SYSTEMS = new Map<number, string>([
  [0x6969, 'nfs'],
  [0x517b, 'smb'],
  [0xff534d42, 'cifs'],
  [0xfe534d42, 'smb2'],
  [0x65735546, 'fuse'],
  [0x00c36400, 'ceph'],
  [0x5346414f, 'afs'],
  [0x6b414653, 'afs'],
  [0x73757245, 'coda'],
  [0x01021997, '9p'],
  [0x564c, 'ncp'],
  [0x01161970, 'gfs2'],
  [0x7461636f, 'ocfs2'],
  [0x0bd00bd0, 'lustre'],
  [0x47504653, 'gpfs'],
  [0x20030528, 'orangefs'],
]);

/** The name of the network or user-space file system a statfs(2) type number stands for, or undefined for a local one. */
export function remoteFileSystemName(type: number | bigint): string | undefined {
  // The type is an unsigned word: a value over 2^31 may come back negative.
  return REMOTE_FILE_SYSTEMS.get(Number(BigInt.asUintN(32, BigInt(type))));
}
