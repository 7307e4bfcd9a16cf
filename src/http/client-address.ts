import { BlockList, isIP, isIPv4 } from 'node:net';

/** Which peers' X-Forwarded-For may be believed (SLEEVE_TRUST_PROXY). */
export class TrustedProxies {
  private readonly list = new BlockList();
  readonly empty: boolean;

  constructor(entries: string[]) {
    this.empty = entries.length === 0;
    for (const entry of entries) {
      const [addr = '', bits] = entry.split('/');
      const type = isIPv4(addr) ? 'ipv4' : 'ipv6';
      if (bits === undefined) this.list.addAddress(addr, type);
      else this.list.addSubnet(addr, Number(bits), type);
    }
  }

  trusts(address: string): boolean {
    if (this.empty || address === '') return false;
    const plain = unmap(address);
    return this.list.check(plain, isIPv4(plain) ? 'ipv4' : 'ipv6');
  }
}

function unmap(address: string): string {
  return address.startsWith('::ffff:') && isIPv4(address.slice(7)) ? address.slice(7) : address;
}

/** The comma-separated values of a header, every line of it in order (Node joins repeated lines with `, `). */
function headerValues(header: string | string[]): string[] {
  return (Array.isArray(header) ? header.join(',') : header).split(',').map((s) => s.trim());
}

/** An X-Forwarded-For entry as a plain address (`1.2.3.4:5678` and `[v6]:port` lose the port), or undefined when it is none. */
function entryAddress(entry: string): string | undefined {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(entry);
  const plain = bracketed?.[1] ?? (/^[\d.]+:\d+$/.test(entry) ? entry.slice(0, entry.indexOf(':')) : entry);
  return isIP(plain) === 0 ? undefined : unmap(plain);
}

/**
 * The client's address: the peer, or, when the peer is a trusted proxy, the right-most
 * address in X-Forwarded-For (all its lines, in order) that is not itself a trusted proxy:
 * each proxy appends the address it was reached from, so what lies left of the first
 * untrusted address is whatever the client chose to send. An entry that is no address
 * (`unknown`, a name) ends the walk at the proxy that passed it on.
 */
export function clientAddress(peer: string | undefined, forwardedFor: string | string[] | undefined, trusted: TrustedProxies): string {
  let address = unmap(peer ?? '');
  if (!trusted.trusts(address) || forwardedFor === undefined) return address;
  const hops = headerValues(forwardedFor).filter((s) => s !== '');
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = entryAddress(hops[i] as string);
    if (hop === undefined) return address;
    address = hop;
    if (!trusted.trusts(address)) return address;
  }
  return address;
}

/**
 * The protocol a trusted peer says the client used: the right-most X-Forwarded-Proto value
 * (all its lines, in order), the one the peer itself set or passed on, lower-cased;
 * undefined without the header. Values further left were written by hops further out, or by
 * the client: a proxy that appends to this header rather than setting it would otherwise
 * let `X-Forwarded-Proto: https` sent over plain HTTP through. The caller believes it only
 * from a trusted peer.
 */
export function forwardedProto(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  return headerValues(header).at(-1)?.toLowerCase();
}

/**
 * What a throttle counts a client address as: an IPv4 address itself, an IPv6 address by its
 * /64 network (`2001:db8:0:1::/64`). One IPv6 subscriber, host or cloud instance is given a
 * whole /64 (RFC 6177) and picks any address in it, so counting single IPv6 addresses would
 * let one attacker try 2^64 times the limit.
 */
export function throttleAddress(address: string): string {
  if (isIP(address) !== 6) return address;
  const [head = '', tail] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  // An embedded IPv4 tail (64:ff9b::1.2.3.4) is two groups, in the last 32 bits.
  const last = tail === undefined ? left : right;
  if (last.at(-1)?.includes('.') === true) last.splice(-1, 1, '0', '0');
  const groups = [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
