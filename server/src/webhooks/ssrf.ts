// Owns the SSRF rules for webhook targets: http(s) only, and every address the host resolves to must be public
// unless WEBHOOK_ALLOW_PRIVATE_URLS=true. The checked address is the one connected to (sender.ts pins it), so a
// DNS answer that changes between the check and the connection (rebinding) cannot reach a private address.
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to all its addresses (tests inject one to change the answer between calls). */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolver: Resolver = async (hostname) => {
  const all = await dnsLookup(hostname, { all: true, verbatim: true });
  return all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

// One list per family: a single BlockList also matches IPv4 addresses against IPv6 rules (::/96 would then
// refuse every IPv4 address).
const refusedV4 = new BlockList();
const refusedV6 = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this network", 0.0.0.0
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const)
  refusedV4.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['::ffff:0:0', 96], // IPv4-mapped: refused outright rather than unwrapped
  ['::', 96], // IPv4-compatible (deprecated)
  ['64:ff9b::', 96], // NAT64
  ['64:ff9b:1::', 48],
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4 (embeds any IPv4 address)
  ['fc00::', 7], // unique-local, incl. fd00:ec2::254 (EC2 metadata)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const)
  refusedV6.addSubnet(net, prefix, 'ipv6');

export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  return family === 6 ? refusedV6.check(address, 'ipv6') : refusedV4.check(address, 'ipv4');
}

export class UrlRefused extends Error {}

/** http(s) with a host, no credentials; the normalised URL string. */
export function parseWebhookUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UrlRefused('must be an absolute http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UrlRefused('must use http or https');
  if (!url.hostname) throw new UrlRefused('must have a host');
  if (url.username || url.password) throw new UrlRefused('must not contain credentials');
  return url;
}

/** The host without IPv6 brackets. */
export const bareHost = (url: URL) => url.hostname.replace(/^\[|\]$/g, '');

/**
 * The address to connect to: the host's first address, after checking that every address it resolves to is
 * allowed (a host with one private address among public ones is refused: which one a client picks is not ours
 * to predict). Throws UrlRefused.
 */
export async function resolveTarget(
  url: URL,
  options: { allowPrivate: boolean; resolve: Resolver },
): Promise<ResolvedAddress> {
  const host = bareHost(url);
  const literal = isIP(host);
  let addresses: ResolvedAddress[];
  if (literal !== 0) addresses = [{ address: host, family: literal === 6 ? 6 : 4 }];
  else {
    try {
      addresses = await options.resolve(host);
    } catch (err) {
      throw new UrlRefused(`host does not resolve (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  const first = addresses[0];
  if (!first) throw new UrlRefused('host does not resolve');
  if (!options.allowPrivate) {
    const bad = addresses.find((a) => isPrivateAddress(a.address));
    if (bad) throw new UrlRefused(`resolves to a private or reserved address (${bad.address})`);
  }
  return first;
}
