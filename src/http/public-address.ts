import { BlockList, isIP } from 'node:net';

/*
 * Which addresses are a public host's: the upstream's redirects (cover-art/upstream/upstream-http.ts) and
 * Client ID Metadata Documents (auth/client-metadata.ts) reach no other unless the operator says so.
 */

const NOT_PUBLIC_V4 = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  NOT_PUBLIC_V4.addSubnet(net, prefix, 'ipv4');
}
/** IPv6's global unicast range, less the parts that are not one host's public address. */
const GLOBAL_V6 = new BlockList();
GLOBAL_V6.addSubnet('2000::', 3, 'ipv6');
const NOT_PUBLIC_V6 = new BlockList();
// IETF assignments (Teredo among them), documentation, 6to4 (which wraps any IPv4 address).
NOT_PUBLIC_V6.addSubnet('2001::', 23, 'ipv6');
NOT_PUBLIC_V6.addSubnet('2001:db8::', 32, 'ipv6');
NOT_PUBLIC_V6.addSubnet('2002::', 16, 'ipv6');

/** Whether `address` (an IP address as text) is a public unicast address: not loopback, private, link-local, shared, reserved, multicast or documentation. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !NOT_PUBLIC_V4.check(address, 'ipv4');
  if (family !== 6) return false;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped !== null) return isPublicAddress(mapped[1] as string);
  return GLOBAL_V6.check(address, 'ipv6') && !NOT_PUBLIC_V6.check(address, 'ipv6');
}

