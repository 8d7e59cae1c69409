// CACHE_CLUSTER / CACHE_URL validation (one clear message, never the URL itself), seed-node parsing, and the bus
// channel routing that spreads notification traffic over the cluster's shards.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { parseClusterUrls } from '../../src/infra/store.js';
import { busChannels, channelFor, realtimeKeys } from '../../src/realtime/keys.js';

const dataDir = mkdtempSync(path.join(tmpdir(), 'herald-cc-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
const base = { DATA_DIR: dataDir };

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('CACHE_CLUSTER configuration', () => {
  it('accepts a list of seed nodes with CACHE_CLUSTER=true', () => {
    const c = loadConfig({
      ...base,
      CACHE_CLUSTER: 'true',
      CACHE_URL: 'redis://:pw@10.0.0.1:7001, redis://10.0.0.2:7002',
    });
    expect(c.CACHE_CLUSTER).toBe(true);
    expect(c.distributed).toBe(true);
  });

  it('refuses a list without CACHE_CLUSTER, CACHE_CLUSTER without a URL, and bad entries (without echoing them)', () => {
    expect(problemsOf({ ...base, CACHE_URL: 'redis://a:1,redis://b:2' })).toEqual([
      'CACHE_URL lists several nodes: set CACHE_CLUSTER=true for a Redis Cluster, or give one URL',
    ]);
    expect(problemsOf({ ...base, CACHE_CLUSTER: 'true' })).toEqual([
      'CACHE_CLUSTER=true requires CACHE_URL (comma-separated seed node URLs)',
    ]);
    const bad = problemsOf({
      ...base,
      CACHE_CLUSTER: 'true',
      CACHE_URL: 'redis://:secret@a:1,http://b:2,redis://',
    });
    expect(bad).toHaveLength(1);
    expect(bad[0]).toMatch(/^CACHE_URL: 2 of 3 entries are not redis:\/\/ or rediss:\/\/ URLs with a host/);
    expect(bad[0]).not.toContain('secret');
  });

  it('parses seed nodes, credentials and TLS', () => {
    expect(parseClusterUrls('redis://u:p%40ss@h1:7001,rediss://h2')).toEqual({
      nodes: [
        { host: 'h1', port: 7001 },
        { host: 'h2', port: 6379 },
      ],
      username: 'u',
      password: 'p@ss',
      tls: true,
    });
  });
});

describe('bus channel layout', () => {
  const channels = busChannels('herald:rt:bus');

  it('routes chat, control and notifications to their channels; one user always to the same one', () => {
    expect(channelFor(channels, 'chat.event', {}, 'm1')).toBe('herald:rt:bus:chat');
    expect(channelFor(channels, 'rt.presence', {}, 'm1')).toBe('herald:rt:bus');
    const one = channelFor(channels, 'notifications.events', { kind: 'user', userId: 'u-1' }, 'm1');
    expect(channelFor(channels, 'notifications.events', { kind: 'user', userId: 'u-1' }, 'm2')).toBe(one);
    expect(channels.notifications).toContain(one);
  });

  it('spreads users over every notification channel', () => {
    const used = new Set<string>();
    for (let i = 0; i < 2_000; i++) {
      used.add(channelFor(channels, 'notifications.events', { userId: `user-${i}` }, String(i)));
    }
    expect(used.size).toBe(channels.notifications.length);
  });

  it('tags registry and presence keys only on a cluster', () => {
    expect(realtimeKeys('h:').instances).toBe('h:rt:instances');
    expect(realtimeKeys('h:', { cluster: true }).instances).toBe('h:{rt}:instances');
    expect(realtimeKeys('h:', { cluster: true }).online('i1')).toBe('h:{rt}:presence:i1:online');
  });
});
