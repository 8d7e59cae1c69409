// One contract suite run against every bus implementation (in-process, degraded fallback, Redis), then the
// Redis-only behaviour: cross-instance delivery, echo, latency, dedup, hostile input, oversize, outage/recovery.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createStore, type Store } from '../../src/infra/store.js';
import { type Bus, createDegradedBus, createMemoryBus, type Envelope } from '../../src/realtime/bus.js';
import { realtimeKeys } from '../../src/realtime/keys.js';
import { createRedisBus, type RedisBus } from '../../src/realtime/redis-bus.js';
import { TEST_REDIS_URL } from '../helpers/env.js';
import { startRedisServer, type TestRedis } from '../helpers/redis-server.js';

const logger = pino({ level: 'silent' });
const MAX_BYTES = 8 * 1024;
const noop = () => {};

interface Pair {
  bus: RedisBus;
  store: Store;
}

function redisBus(url: string, prefix: string, instanceId: string): Pair {
  const store = createStore({ url, prefix });
  const redis = store.redis;
  if (!redis) throw new Error('expected a Redis store');
  const bus = createRedisBus({
    instanceId,
    pub: redis.pub,
    sub: redis.sub,
    watch: [redis.data],
    channel: realtimeKeys(prefix).channel,
    maxPayloadBytes: MAX_BYTES,
    dedupWindowMs: 5_000,
    logger,
  });
  return { bus, store };
}

function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 10_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + timeoutMs;
    const tick = () => {
      const value = probe();
      if (value !== undefined) return resolve(value);
      if (Date.now() > deadline) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(tick, 10);
    };
    tick();
  });
}

const implementations: Array<{
  name: string;
  degraded: boolean;
  /**
   * What publish resolves with (Bus.publish: false when the message stayed on this instance although others may
   * exist): for an ordinary payload, and for one that cannot be serialised for the store.
   */
  reaches: { ordinary: boolean; unserialisable: boolean };
  make(): Promise<{ bus: Bus; close(): Promise<void> }>;
}> = [
  {
    name: 'in-process',
    degraded: false,
    // No store and no other instance: nothing is ever left behind.
    reaches: { ordinary: true, unserialisable: true },
    make: async () => {
      const bus = createMemoryBus('mem-1', noop);
      return { bus, close: () => bus.close() };
    },
  },
  {
    name: 'degraded fallback',
    degraded: true,
    reaches: { ordinary: false, unserialisable: false },
    make: async () => {
      const bus = createDegradedBus('deg-1', noop);
      return { bus, close: () => bus.close() };
    },
  },
  {
    name: 'redis',
    degraded: false,
    reaches: { ordinary: true, unserialisable: false },
    make: async () => {
      const pair = redisBus(TEST_REDIS_URL, `t:bus:${randomUUID()}:`, 'redis-1');
      await pair.bus.start();
      return {
        bus: pair.bus,
        close: async () => {
          await pair.bus.close();
          await pair.store.close();
        },
      };
    },
  },
];

describe.each(implementations)('bus contract: $name', (impl) => {
  let bus: Bus;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ bus, close } = await impl.make());
  });
  afterAll(async () => {
    await close();
  });

  it('delivers to local subscribers before publish even resolves', async () => {
    const got: unknown[] = [];
    const off = bus.subscribe('c.local', (payload) => got.push(payload));
    const pending = bus.publish('c.local', { n: 1 });
    expect(got).toEqual([{ n: 1 }]);
    await pending;
    off();
  });

  it('passes the envelope with its metadata', async () => {
    let envelope: Envelope | undefined;
    const off = bus.subscribe('c.meta', (_p, e) => {
      envelope = e;
    });
    await bus.publish('c.meta', 'x');
    expect(envelope).toMatchObject({ v: 1, topic: 'c.meta', instanceId: bus.instanceId, payload: 'x' });
    expect(typeof envelope?.id).toBe('string');
    expect(envelope?.sentAt).toBeGreaterThan(0);
    off();
  });

  it('keeps topics apart and stops after unsubscribe', async () => {
    const a: unknown[] = [];
    const b: unknown[] = [];
    const offA = bus.subscribe('c.a', (p) => a.push(p));
    const offB = bus.subscribe('c.b', (p) => b.push(p));
    await bus.publish('c.a', 1);
    offA();
    await bus.publish('c.a', 2);
    await bus.publish('c.b', 3);
    expect(a).toEqual([1]);
    expect(b).toEqual([3]);
    offB();
  });

  it('isolates a throwing handler and never rejects', async () => {
    const got: unknown[] = [];
    const offBad = bus.subscribe('c.throw', () => {
      throw new Error('boom');
    });
    const offGood = bus.subscribe('c.throw', (p) => got.push(p));
    await expect(bus.publish('c.throw', 'ok')).resolves.toBe(impl.reaches.ordinary);
    expect(got).toEqual(['ok']);
    offBad();
    offGood();
  });

  it('never rejects on an unserialisable payload and still delivers locally', async () => {
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const got: unknown[] = [];
    const off = bus.subscribe('c.circular', (p) => got.push(p));
    await expect(bus.publish('c.circular', circular)).resolves.toBe(impl.reaches.unserialisable);
    expect(got).toHaveLength(1);
    off();
  });

  it('counts publishes and reports its mode', async () => {
    const before = bus.stats().messagesPublished;
    await bus.publish('c.count', 1);
    await bus.publish('c.count', 2);
    expect(bus.stats().messagesPublished).toBe(before + 2);
    expect(bus.isDegraded()).toBe(impl.degraded);
  });
});

describe('redis bus between two instances', () => {
  const prefix = `t:bus2:${randomUUID()}:`;
  let a: Pair;
  let b: Pair;
  let raw: Redis;
  const channel = realtimeKeys(prefix).channel;
  beforeAll(async () => {
    a = redisBus(TEST_REDIS_URL, prefix, 'inst-a');
    b = redisBus(TEST_REDIS_URL, prefix, 'inst-b');
    raw = new Redis(TEST_REDIS_URL);
    await Promise.all([a.bus.start(), b.bus.start()]);
  });
  afterAll(async () => {
    raw.disconnect();
    for (const p of [a, b]) {
      await p.bus.close();
      await p.store.close();
    }
  });

  it('delivers to the other instance once, skips its own echo and records latency', async () => {
    const onA: unknown[] = [];
    const onB: Envelope[] = [];
    const offA = a.bus.subscribe('x.msg', (p) => onA.push(p));
    const offB = b.bus.subscribe('x.msg', (_p, e) => onB.push(e));
    const echoesBefore = a.bus.stats().echoesSkipped;
    await a.bus.publish('x.msg', { hello: 'world' });
    await waitFor('remote delivery', () => (onB.length > 0 ? true : undefined));
    await waitFor('echo skipped', () => (a.bus.stats().echoesSkipped > echoesBefore ? true : undefined));
    expect(onA).toEqual([{ hello: 'world' }]);
    expect(onB).toHaveLength(1);
    expect(onB[0]).toMatchObject({ instanceId: 'inst-a', payload: { hello: 'world' } });
    const stats = b.bus.stats();
    expect(stats.messagesReceived).toBeGreaterThanOrEqual(1);
    expect(stats.latencyCount).toBe(stats.messagesReceived);
    expect(stats.maxLatencyMs).toBeGreaterThanOrEqual(stats.averageLatencyMs);
    offA();
    offB();
  });

  it('carries a room topic only to instances that joined it, on a channel of its own', async () => {
    const topic = `chat.room.${randomUUID()}`;
    const roomChannel = `${channel}:room:${topic.slice('chat.room.'.length)}`;
    const onB: unknown[] = [];
    // Not joined: B's subscriber of the topic hears nothing, and nobody listens on the room's channel.
    const offLocal = b.bus.subscribe(topic, (p) => onB.push(p));
    await a.bus.publish(topic, { n: 1 });
    expect(await raw.pubsub('NUMSUB', roomChannel)).toEqual([roomChannel, 0]);
    const leave = await b.bus.join(topic, (p) => onB.push(p));
    expect(await raw.pubsub('NUMSUB', roomChannel)).toEqual([roomChannel, 1]);
    await a.bus.publish(topic, { n: 2 });
    // Both of B's handlers of the topic receive it, once each.
    await waitFor('room delivery', () => (onB.length >= 2 ? true : undefined));
    expect(onB).toEqual([{ n: 2 }, { n: 2 }]);
    leave();
    offLocal();
    // The last local handler gone, the instance leaves the channel.
    for (
      let i = 0;
      i < 100 && ((await raw.pubsub('NUMSUB', roomChannel)) as [string, number])[1] !== 0;
      i++
    ) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await raw.pubsub('NUMSUB', roomChannel)).toEqual([roomChannel, 0]);
  });

  it('drops a duplicated message id but delivers two updates of one entity', async () => {
    const got: unknown[] = [];
    const off = b.bus.subscribe('x.dup', (p) => got.push(p));
    const dupBefore = b.bus.stats().duplicatesDropped;
    const envelope = (version: number) => ({
      v: 1,
      id: randomUUID(),
      topic: 'x.dup',
      instanceId: 'inst-c',
      sentAt: Date.now(),
      payload: { entity: 'e1', version },
    });
    const first = JSON.stringify(envelope(1));
    await raw.publish(channel, first);
    await raw.publish(channel, first);
    await raw.publish(channel, JSON.stringify(envelope(2)));
    await waitFor('both versions', () => (got.length >= 2 ? true : undefined));
    expect(got).toEqual([
      { entity: 'e1', version: 1 },
      { entity: 'e1', version: 2 },
    ]);
    expect(b.bus.stats().duplicatesDropped).toBe(dupBefore + 1);
    off();
  });

  it('drops a fuzz of hostile messages, counts each one, and keeps delivering', async () => {
    const got: unknown[] = [];
    const off = b.bus.subscribe('x.fuzz', (p) => got.push(p));
    const before = b.bus.stats().malformedDropped;
    const base = () => ({
      v: 1,
      id: randomUUID(),
      topic: 'x.fuzz',
      instanceId: 'inst-z',
      sentAt: Date.now(),
      payload: 1,
    });
    const hostile: string[] = [
      '',
      '{',
      '"string"',
      JSON.stringify({ ...base(), instanceId: 'evil id; DROP' }),
      JSON.stringify({ ...base(), instanceId: 'x'.repeat(1000) }),
      JSON.stringify({ ...base(), id: 42 }),
      JSON.stringify({ ...base(), topic: ['x.fuzz'] }),
      JSON.stringify({ ...base(), sentAt: null }),
      JSON.stringify({ ...base(), payload: 'y'.repeat(MAX_BYTES * 2) }),
      JSON.stringify({ ...base(), v: 1, extra: 'field' }),
    ];
    for (let i = 0; i < 200; i++) {
      const e: Record<string, unknown> = base();
      const keys = Object.keys(e);
      e[keys[i % keys.length] as string] = [null, {}, [], -1, '\n'][i % 5];
      hostile.push(JSON.stringify(e));
    }
    const stillValid = hostile.filter((h) => h.length <= MAX_BYTES && isValidOtherwise(h)).length;
    const expectedDrops = hostile.length - stillValid;
    for (const message of hostile) await raw.publish(channel, message);
    await raw.publish(channel, JSON.stringify({ ...base(), payload: 'final' }));
    await waitFor('valid message after the fuzz', () => (got.includes('final') ? true : undefined));
    expect(b.bus.stats().malformedDropped - before).toBe(expectedDrops);
    // Only payload mutations (any JSON value is a valid payload) got through, plus the final valid message.
    expect(got.length).toBe(1 + stillValid);
    expect(expectedDrops).toBeGreaterThan(150);
    off();
  });

  it('refuses to send an oversized or badly named message but still delivers it locally', async () => {
    const onA: unknown[] = [];
    const onB: unknown[] = [];
    const offA = a.bus.subscribe('x.big', (p) => onA.push(p));
    const offB = b.bus.subscribe('x.big', (p) => onB.push(p));
    const failures = a.bus.stats().publishFailures;
    await a.bus.publish('x.big', 'z'.repeat(MAX_BYTES + 1));
    await a.bus.publish('bad topic!', 1);
    expect(onA).toHaveLength(1);
    expect(a.bus.stats().publishFailures).toBe(failures + 2);
    // A later message arrives, the big one never did.
    await a.bus.publish('x.big', 'small');
    await waitFor('small message', () => (onB.length > 0 ? true : undefined));
    expect(onB).toEqual(['small']);
    offA();
    offB();
  });
});

/** A fuzzed envelope whose only mutation left every header field valid (payload replaced by a JSON value). */
function isValidOtherwise(raw: string): boolean {
  try {
    const e = JSON.parse(raw) as Record<string, unknown>;
    return (
      e.v === 1 &&
      typeof e.id === 'string' &&
      /^[A-Za-z0-9_-]{8,64}$/.test(e.id) &&
      e.topic === 'x.fuzz' &&
      e.instanceId === 'inst-z' &&
      typeof e.sentAt === 'number' &&
      e.sentAt > 0 &&
      e.payload !== undefined &&
      Object.keys(e).length === 6
    );
  } catch {
    return false;
  }
}

describe('redis bus through a store outage', () => {
  let server: TestRedis;
  let a: Pair;
  let b: Pair;
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => rejections.push(reason);
  beforeAll(async () => {
    process.on('unhandledRejection', onRejection);
    server = await startRedisServer();
    const prefix = `t:out:${randomUUID()}:`;
    a = redisBus(server.url, prefix, 'out-a');
    b = redisBus(server.url, prefix, 'out-b');
    for (const p of [a, b]) p.store.redis?.data.on('error', noop);
    await Promise.all([a.bus.start(), b.bus.start()]);
  });
  afterEach(() => {
    expect(rejections).toEqual([]);
  });
  afterAll(async () => {
    process.off('unhandledRejection', onRejection);
    for (const p of [a, b]) {
      await p.bus.close();
      await p.store.close();
    }
    await server.close();
  });

  it('delivers locally while degraded, then recovers and delivers across again', async () => {
    const onA: unknown[] = [];
    const onB: unknown[] = [];
    a.bus.subscribe('o.msg', (p) => onA.push(p));
    b.bus.subscribe('o.msg', (p) => onB.push(p));
    await a.bus.publish('o.msg', 'before');
    await waitFor('delivery before outage', () => (onB.length === 1 ? true : undefined));

    const degraded = new Promise<void>((resolve) => a.bus.onDegraded(resolve));
    await server.stop();
    await degraded;
    expect(a.bus.isDegraded()).toBe(true);
    const failures = a.bus.stats().publishFailures;
    for (let i = 0; i < 20; i++) await a.bus.publish('o.msg', `during-${i}`);
    expect(onA.filter((p) => String(p).startsWith('during'))).toHaveLength(20);
    // Local-only delivery is the design while degraded, not a failure.
    expect(a.bus.stats().publishFailures).toBe(failures);
    expect(a.bus.stats().degradedTransitions).toBe(1);

    const recovered = Promise.all(
      [a, b].map((p) => new Promise<void>((resolve) => p.bus.onRecovered(resolve))),
    );
    await server.start();
    await recovered;
    expect(a.bus.isDegraded()).toBe(false);
    await a.bus.publish('o.msg', 'after');
    await waitFor('delivery after recovery', () => (onB.includes('after') ? true : undefined));
    expect(onB).toEqual(['before', 'after']);
  });
});
