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

/**
 * Every entry of IANA's IPv4 and IPv6 Special-Purpose Address Registries (iana-ipv4-special-registry,
 * iana-ipv6-special-registry, as of 2025), plus multicast and the deprecated site-local and IPv4-compatible
 * blocks. All are refused, the few the registry marks "globally reachable" (AS112, AMT, anycast relays, TURN/PCP
 * anycast) included: no webhook receiver legitimately lives at one, and each is a route into infrastructure.
 * test/webhooks/ssrf-ranges.test.ts checks every entry from its own copy of the registries.
 */
export const REFUSED_RANGES: ReadonlyArray<readonly [network: string, prefix: number, name: string]> = [
  // IPv4
  ['0.0.0.0', 8, '"this network" (incl. 0.0.0.0/32 "this host")'],
  ['10.0.0.0', 8, 'private-use'],
  ['100.64.0.0', 10, 'shared address space (CGNAT)'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local (cloud metadata 169.254.169.254)'],
  ['172.16.0.0', 12, 'private-use'],
  ['192.0.0.0', 24, 'IETF protocol assignments (DS-Lite, NAT64 discovery, PCP/TURN anycast)'],
  ['192.0.2.0', 24, 'documentation (TEST-NET-1)'],
  ['192.31.196.0', 24, 'AS112-v4'],
  ['192.52.193.0', 24, 'AMT'],
  ['192.88.99.0', 24, 'deprecated 6to4 relay anycast'],
  ['192.168.0.0', 16, 'private-use'],
  ['192.175.48.0', 24, 'direct delegation AS112 service'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation (TEST-NET-2)'],
  ['203.0.113.0', 24, 'documentation (TEST-NET-3)'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved (incl. 255.255.255.255 limited broadcast)'],
  // IPv6
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['::', 96, 'IPv4-compatible (deprecated)'],
  ['::ffff:0:0', 96, 'IPv4-mapped: refused outright rather than unwrapped'],
  ['64:ff9b::', 96, 'IPv4/IPv6 translation (NAT64)'],
  ['64:ff9b:1::', 48, 'local-use IPv4/IPv6 translation'],
  ['100::', 64, 'discard-only'],
  ['100:0:0:1::', 64, 'dummy IPv6 prefix'],
  [
    '2001::',
    23,
    'IETF protocol assignments (TEREDO, PCP/TURN/DNS-SD anycast, AMT, AS112-v6, ORCHID, DRONE DETs)',
  ],
  ['2001:2::', 48, 'benchmarking'],
  ['2001:db8::', 32, 'documentation'],
  ['2002::', 16, '6to4 (embeds any IPv4 address)'],
  ['2620:4f:8000::', 48, 'direct delegation AS112 service'],
  ['3fff::', 20, 'documentation'],
  ['5f00::', 16, 'segment routing (SRv6) SIDs'],
  ['fc00::', 7, 'unique-local (incl. fd00:ec2::254, EC2 metadata)'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local (deprecated)'],
  ['ff00::', 8, 'multicast'],
];

// One list per family: a single BlockList also matches IPv4 addresses against IPv6 rules (::/96 would then
// refuse every IPv4 address).
const refusedV4 = new BlockList();
const refusedV6 = new BlockList();
for (const [network, prefix] of REFUSED_RANGES) {
  if (isIP(network) === 4) refusedV4.addSubnet(network, prefix, 'ipv4');
  else refusedV6.addSubnet(network, prefix, 'ipv6');
}

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
