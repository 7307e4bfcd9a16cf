import { BlockList, isIPv4 } from 'node:net';

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

/**
 * The client's address: the peer, or, when the peer is a trusted proxy, the nearest
 * address in X-Forwarded-For that is not itself a trusted proxy.
 */
export function clientAddress(peer: string | undefined, forwardedFor: string | string[] | undefined, trusted: TrustedProxies): string {
  let address = unmap(peer ?? '');
  if (!trusted.trusts(address) || forwardedFor === undefined) return address;
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor)
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (let i = hops.length - 1; i >= 0; i--) {
    address = unmap(hops[i] as string);
    if (!trusted.trusts(address)) return address;
  }
  return address;
}
