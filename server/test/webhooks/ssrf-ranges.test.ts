// Issue 22 (8): the webhook address check refuses every range of IANA's IPv4 and IPv6 Special-Purpose Address
// Registries. The table below is this test's own copy of the registries (not the module's list), checked at the
// first and the last address of each block, and next to public addresses that must stay allowed.
import { describe, expect, it } from 'vitest';
import { isPrivateAddress } from '../../src/webhooks/ssrf.js';

// [block, registry name] — https://www.iana.org/assignments/iana-ipv4-special-registry and
// https://www.iana.org/assignments/iana-ipv6-special-registry, plus multicast and deprecated site-local.
const REGISTRY: Array<[string, string]> = [
  ['0.0.0.0/8', 'this network'],
  ['0.0.0.0/32', 'this host on this network'],
  ['10.0.0.0/8', 'private-use'],
  ['100.64.0.0/10', 'shared address space'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link local'],
  ['172.16.0.0/12', 'private-use'],
  ['192.0.0.0/24', 'IETF protocol assignments'],
  ['192.0.0.0/29', 'IPv4 service continuity prefix'],
  ['192.0.0.8/32', 'IPv4 dummy address'],
  ['192.0.0.9/32', 'port control protocol anycast'],
  ['192.0.0.10/32', 'traversal using relays around NAT anycast'],
  ['192.0.0.170/32', 'NAT64/DNS64 discovery'],
  ['192.0.0.171/32', 'NAT64/DNS64 discovery'],
  ['192.0.2.0/24', 'documentation (TEST-NET-1)'],
  ['192.31.196.0/24', 'AS112-v4'],
  ['192.52.193.0/24', 'AMT'],
  ['192.88.99.0/24', 'deprecated (6to4 relay anycast)'],
  ['192.168.0.0/16', 'private-use'],
  ['192.175.48.0/24', 'direct delegation AS112 service'],
  ['198.18.0.0/15', 'benchmarking'],
  ['198.51.100.0/24', 'documentation (TEST-NET-2)'],
  ['203.0.113.0/24', 'documentation (TEST-NET-3)'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'],
  ['255.255.255.255/32', 'limited broadcast'],
  ['::1/128', 'loopback address'],
  ['::/128', 'unspecified address'],
  ['::ffff:0:0/96', 'IPv4-mapped address'],
  ['64:ff9b::/96', 'IPv4-IPv6 translation'],
  ['64:ff9b:1::/48', 'IPv4-IPv6 translation (local use)'],
  ['100::/64', 'discard-only address block'],
  ['100:0:0:1::/64', 'dummy IPv6 prefix'],
  ['2001::/23', 'IETF protocol assignments'],
  ['2001::/32', 'TEREDO'],
  ['2001:1::1/128', 'port control protocol anycast'],
  ['2001:1::2/128', 'traversal using relays around NAT anycast'],
  ['2001:1::3/128', 'DNS-SD service registration protocol anycast'],
  ['2001:2::/48', 'benchmarking'],
  ['2001:3::/32', 'AMT'],
  ['2001:4:112::/48', 'AS112-v6'],
  ['2001:10::/28', 'deprecated (previously ORCHID)'],
  ['2001:20::/28', 'ORCHIDv2'],
  ['2001:30::/28', 'drone remote ID protocol entity tags (DETs)'],
  ['2001:db8::/32', 'documentation'],
  ['2002::/16', '6to4'],
  ['2620:4f:8000::/48', 'direct delegation AS112 service'],
  ['3fff::/20', 'documentation'],
  ['5f00::/16', 'segment routing (SRv6) SIDs'],
  ['fc00::/7', 'unique-local'],
  ['fe80::/10', 'link-local unicast'],
  ['fec0::/10', 'site-local (deprecated)'],
  ['ff00::/8', 'multicast'],
];

function v4ToInt(a: string): bigint {
  return a.split('.').reduce((n, part) => (n << 8n) + BigInt(part), 0n);
}
function intToV4(n: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 255n)).join('.');
}
function v6ToInt(a: string): bigint {
  const [head = '', tail = ''] = a.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = a.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
  return groups.reduce((n, g) => (n << 16n) + BigInt(`0x${g}`), 0n);
}
function intToV6(n: bigint): string {
  return Array.from({ length: 8 }, (_, i) => ((n >> BigInt((7 - i) * 16)) & 0xffffn).toString(16)).join(':');
}

/** First and last address of a block. */
function bounds(cidr: string): [string, string] {
  const [network = '', prefixText = ''] = cidr.split('/');
  const prefix = BigInt(prefixText);
  const v6 = network.includes(':');
  const bits = v6 ? 128n : 32n;
  const start = v6 ? v6ToInt(network) : v4ToInt(network);
  const end = start | ((1n << (bits - prefix)) - 1n);
  return v6 ? [intToV6(start), intToV6(end)] : [intToV4(start), intToV4(end)];
}

describe('webhook address check against the IANA special-purpose registries', () => {
  it.each(REGISTRY)('refuses all of %s (%s)', (cidr) => {
    const [first, last] = bounds(cidr);
    expect(isPrivateAddress(first), first).toBe(true);
    expect(isPrivateAddress(last), last).toBe(true);
  });

  it.each([
    '93.184.216.34',
    '1.1.1.1',
    '8.8.8.8',
    '100.63.255.255', // just below CGNAT
    '100.128.0.0', // just above it
    '192.0.1.1',
    '192.88.98.255',
    '2606:4700:4700::1111',
    '2001:4860:4860::8888',
    '2001:200::1', // first allocation after IETF's 2001::/23
    '2620:4f:7fff:ffff::1',
    '3fff:1000::1', // just past 3fff::/20
    '5eff:ffff::1',
  ])('allows the public address %s', (address) => {
    expect(isPrivateAddress(address)).toBe(false);
  });

  it('refuses what is not an address at all', () => {
    expect(isPrivateAddress('not-an-ip')).toBe(true);
  });
});
