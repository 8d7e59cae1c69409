// Owns the Redis bus and its degraded fallback (docs/architecture.md, "Real-time core" and "Redis Cluster").
import { randomUUID } from 'node:crypto';
import type { Logger } from '../infra/logger.js';
import type { StoreClient } from '../infra/store.js';
import { type Bus, BusCounters, createEnvelope, createLocalBus, LocalDispatcher } from './bus.js';
import { createDedup } from './dedup.js';
import { createRateLimitedLog, isValidTopic, parseEnvelope } from './envelope.js';
import { busChannels, channelFor } from './keys.js';

/** Probe messages are not envelopes: receivers recognise them by this start and never parse or count them. */
const PROBE_MARK = '~probe:';

export interface RedisBusOptions {
  instanceId: string;
  pub: StoreClient;
  sub: StoreClient;
  /** Other connections whose loss also means degraded mode (the data connection used by presence). */
  watch?: StoreClient[];
  /** Control channel name, already prefixed with the store prefix; the chat and notification channels derive from it. */
  channel: string;
  /** Redis Cluster: SPUBLISH/SSUBSCRIBE, and an end-to-end probe of every channel to detect a failed shard. */
  sharded?: boolean;
  notificationChannels?: number;
  /** Cluster only: how often a healthy bus probes its channels (a degraded one probes every PROBE_RETRY_MS). */
  probeIntervalMs?: number;
  maxPayloadBytes: number;
  dedupWindowMs: number;
  logger: Logger;
  /** Each received message's latency, for the Prometheus histogram. */
  onLatencySeconds?: (seconds: number) => void;
}

export interface RedisBus extends Bus {
  /** Resolves once subscribed (or after `timeoutMs`, degraded); never rejects. */
  start(timeoutMs?: number): Promise<void>;
  /** Called after the bus left degraded mode (resubscribed); presence and registry republish then. */
  onRecovered(handler: () => void): () => void;
  /** Called when the bus enters degraded mode. */
  onDegraded(handler: () => void): () => void;
}

const PROBE_RETRY_MS = 500;
/** Room channels probed per round in steady state (in turn), on top of the fixed channels. */
const ROOM_PROBES_PER_ROUND = 16;
/** Rounds after a topology event that probe every joined room channel (at 5 s a round: ioredis' slots refresh). */
const JOINED_ROUNDS_AFTER_TOPOLOGY_EVENT = 4;
const PROBE_TIMEOUT_MS = 2_000;

export function createRedisBus(options: RedisBusOptions): RedisBus {
  const { instanceId, pub, sub, logger } = options;
  const sharded = options.sharded === true;
  const channels = busChannels(options.channel, options.notificationChannels);
  const subscribed = new Set(channels.all);
  /** Room channels this instance listens on, with the number of local handlers of each. */
  const dynamic = new Map<string, number>();
  const joining = new Map<string, Promise<void>>();
  const connections = [pub, sub, ...(options.watch ?? [])];
  const counters = new BusCounters(options.onLatencySeconds);
  const local = new LocalDispatcher((topic, err) => logger.error({ topic, err }, 'bus handler failed'));
  const fallback = createLocalBus(instanceId, local, counters, true);
  const dedup = createDedup(options.dedupWindowMs);
  const warnDropped = createRateLimitedLog(logger);
  const recoveredHandlers = new Set<() => void>();
  const degradedHandlers = new Set<() => void>();
  // Degraded until the first successful subscribe: before that nothing published would reach anyone.
  let degraded = true;
  let everSubscribed = false;
  let closed = false;
  let recovering: Promise<void> | undefined;

  const notify = (handlers: Set<() => void>, what: string) => {
    for (const handler of handlers) {
      try {
        handler();
      } catch (err) {
        logger.error({ err }, `bus ${what} handler failed`);
      }
    }
  };

  const enterDegraded = (cause: string) => {
    if (degraded || closed) return;
    degraded = true;
    counters.degradedTransitions++;
    logger.warn({ cause }, 'store unreachable: bus degraded to local-only delivery');
    notify(degradedHandlers, 'degraded');
  };

  const allReady = () => connections.every((c) => c.status === 'ready');

  const recover = () => {
    if (closed || !degraded || recovering || !allReady()) return recovering;
    recovering = (async () => {
      try {
        // Idempotent: ioredis may have re-subscribed already; the server confirms either way.
        await subscribeAll();
        // On a cluster "ready" says little about each shard: only our own probe coming back on every channel
        // proves that publishing and receiving work again.
        if (sharded) {
          // Room channels that failed their probe are checked again along with the fixed ones.
          const rooms = (suspect ?? []).filter((ch) => dynamic.has(ch));
          suspect = await probe([...channels.all, ...rooms]);
          if (suspect.length > 0) return;
        }
        if (closed || !allReady()) return;
        degraded = false;
        if (everSubscribed) logger.info('store reachable again: bus left degraded mode');
        everSubscribed = true;
        notify(recoveredHandlers, 'recovered');
      } catch (err) {
        logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'bus subscribe failed');
      } finally {
        recovering = undefined;
      }
    })();
    return recovering;
  };

  /** Cluster: channels whose last probe failed (undefined: unknown, e.g. degraded by a connection event). */
  let suspect: string[] | undefined;
  const subscribeAll = async () => {
    if (!sharded) {
      await sub.subscribe(...channels.all, ...dynamic.keys());
      return;
    }
    // One SSUBSCRIBE per channel: each may live on another shard (ioredis routes it to that shard's subscriber).
    if (!everSubscribed) {
      await Promise.all([...channels.all, ...dynamic.keys()].map((ch) => sub.ssubscribe(ch)));
      return;
    }
    // ioredis re-subscribes by itself after a topology change; this only repairs channels still not carrying
    // our probe. SUNSUBSCRIBE first: ioredis appends every SSUBSCRIBE to the channel list it replays, and
    // SUNSUBSCRIBE removes every copy, so repeated repairs during a long outage do not grow that list.
    await Promise.all(
      (suspect ?? [...channels.all, ...dynamic.keys()]).map(async (ch) => {
        await sub.sunsubscribe(ch).catch(() => {});
        await sub.ssubscribe(ch);
      }),
    );
  };

  const send = (ch: string, raw: string) => (sharded ? pub.spublish(ch, raw) : pub.publish(ch, raw));

  /** Cluster: publishes a probe on every channel; resolves with the channels whose probe did not come back. */
  const pendingProbes = new Map<string, () => void>();
  const probe = async (list: string[] = channels.all): Promise<string[]> => {
    const waits = list.map((ch) => {
      const nonce = randomUUID();
      const arrived = new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => {
          pendingProbes.delete(nonce);
          resolve(false);
        }, PROBE_TIMEOUT_MS);
        timer.unref();
        pendingProbes.set(nonce, () => {
          clearTimeout(timer);
          pendingProbes.delete(nonce);
          resolve(true);
        });
      });
      const sent = send(ch, `${PROBE_MARK}${instanceId}:${nonce}`).then(
        () => true,
        () => false,
      );
      return Promise.all([sent, arrived]).then(([a, b]) => a && b);
    });
    const results = await Promise.all(waits);
    const failed = list.filter((_, i) => !results[i]);
    if (failed.length > 0) {
      logger.debug(
        { failed: failed.length, channels: channels.all.length },
        'bus probe: channels not round-tripping',
      );
    }
    return failed;
  };

  // Cluster: a master can fail while every client stays "ready" (the others still answer). The probe loop turns
  // a shard that stopped carrying our messages into degraded mode, and recovers once all channels round-trip.
  /**
   * Probe rounds left that cover every joined room channel (set by probeSoon: a topology event, a failed publish or
   * a failed room subscribe).
   */
  let joinedRounds = 0;
  /** Where the next round's share of room channels starts (steady state: a few per round, in turn). */
  let joinedCursor = 0;
  const joinedToProbe = (): string[] => {
    const joined = [...dynamic.keys()];
    if (joinedRounds > 0) {
      joinedRounds--;
      return joined;
    }
    if (joined.length <= ROOM_PROBES_PER_ROUND) return joined;
    const start = joinedCursor % joined.length;
    joinedCursor = start + ROOM_PROBES_PER_ROUND;
    const slice = joined.slice(start, start + ROOM_PROBES_PER_ROUND);
    return slice.length < ROOM_PROBES_PER_ROUND
      ? [...slice, ...joined.slice(0, ROOM_PROBES_PER_ROUND - slice.length)]
      : slice;
  };
  let probeTimer: NodeJS.Timeout | undefined;
  let probing = false;
  const scheduleProbe = (ms: number) => {
    if (!sharded || closed) return;
    clearTimeout(probeTimer);
    probeTimer = setTimeout(runProbe, ms);
    probeTimer.unref();
  };
  const runProbe = async () => {
    if (closed || probing) return;
    probing = true;
    try {
      if (degraded) {
        if (allReady()) await recover();
      } else {
        // Room channels are probed too: ioredis re-subscribes sharded channels by itself after a topology change
        // (at once, or at its next slots refresh, seconds later), and when one goes astray nothing else notices: no
        // traffic of ours crosses it, the room just goes silent on this instance. All of them for the rounds
        // following a topology event; otherwise a few per round in turn, since with thousands of rooms joined
        // probing every one each round would cost more than the rooms' own traffic.
        const list = [...channels.all, ...joinedToProbe()];
        // A miss is confirmed once before degrading: one slow round trip on a starved event loop is not an outage.
        // A room left while its probe was out (unsubscribed: its marker cannot come back) is no outage.
        const stillWanted = (chs: string[]) => chs.filter((ch) => subscribed.has(ch));
        let failed = stillWanted(await probe(list));
        if (failed.length > 0) failed = stillWanted(await probe(failed));
        if (failed.length > 0 && !degraded) {
          suspect = failed;
          enterDegraded('a store shard stopped carrying bus messages');
        }
      }
    } finally {
      probing = false;
      scheduleProbe(degraded ? PROBE_RETRY_MS : (options.probeIntervalMs ?? 5_000));
    }
  };
  const probeSoon = () => {
    joinedRounds = JOINED_ROUNDS_AFTER_TOPOLOGY_EVENT;
    if (!degraded) scheduleProbe(0);
  };

  const onDown = (role: string) => () => {
    // Which channels survived is unknown after a lost connection: recovery re-checks them all.
    suspect = undefined;
    enterDegraded(`${role} connection lost`);
  };
  const onReady = () => {
    void recover()?.catch(() => {});
  };
  const listeners: Array<[StoreClient, string, (...args: unknown[]) => void]> = [];
  connections.forEach((conn, i) => {
    const role = i === 0 ? 'publish' : i === 1 ? 'subscribe' : 'data';
    const down = onDown(role);
    for (const event of ['close', 'end', 'reconnecting']) listeners.push([conn, event, down]);
    listeners.push([conn, 'ready', onReady]);
    // Cluster clients report a lost or failing node without changing status: check the channels now.
    if (sharded)
      for (const event of ['-node', '+node', 'node error']) listeners.push([conn, event, probeSoon]);
  });
  for (const [conn, event, fn] of listeners) conn.on(event, fn);

  const onMessage = (ch: string, raw: string) => {
    if (!subscribed.has(ch)) return;
    if (raw.startsWith(PROBE_MARK)) {
      const [from, nonce] = raw.slice(PROBE_MARK.length).split(':');
      if (from === instanceId && nonce) pendingProbes.get(nonce)?.();
      return;
    }
    const receivedAt = Date.now();
    const parsed = parseEnvelope(raw, options.maxPayloadBytes);
    if (!parsed.ok) {
      counters.malformed++;
      warnDropped({ reason: parsed.reason, bytes: raw.length }, 'malformed bus message dropped');
      return;
    }
    const envelope = parsed.envelope;
    if (envelope.instanceId === instanceId) {
      counters.echoes++;
      return;
    }
    if (dedup.seen(envelope.id, receivedAt)) {
      counters.duplicates++;
      return;
    }
    counters.received++;
    counters.recordLatency(receivedAt - envelope.sentAt);
    local.dispatch(envelope);
  };
  const messageEvent = sharded ? 'smessage' : 'message';
  sub.on(messageEvent, onMessage);

  const bus: RedisBus = {
    instanceId,
    async publish(topic, payload) {
      if (closed) return;
      if (degraded) return fallback.publish(topic, payload);
      counters.published++;
      const envelope = createEnvelope(instanceId, topic, payload);
      local.dispatch(envelope);
      let raw: string;
      try {
        if (!isValidTopic(topic)) throw new Error(`invalid topic "${String(topic).slice(0, 64)}"`);
        raw = JSON.stringify(envelope);
      } catch (err) {
        counters.publishFailures++;
        logger.error({ topic, err }, 'bus message could not be serialised; delivered locally only');
        return;
      }
      // Receivers drop anything above the bound, so there is no point sending it.
      if (Buffer.byteLength(raw) > options.maxPayloadBytes) {
        counters.publishFailures++;
        logger.error({ topic, bytes: raw.length }, 'bus message too large; delivered locally only');
        return;
      }
      try {
        await send(channelFor(channels, topic, payload, envelope.id), raw);
      } catch (err) {
        counters.publishFailures++;
        logger.warn({ topic, err: err instanceof Error ? err.message : String(err) }, 'bus publish failed');
        probeSoon();
      }
    },
    subscribe: (topic, handler) => local.subscribe(topic, handler),
    async join(topic, handler) {
      const off = local.subscribe(topic, handler);
      const ch = channelFor(channels, topic, undefined, '');
      const count = (dynamic.get(ch) ?? 0) + 1;
      dynamic.set(ch, count);
      subscribed.add(ch);
      if (count === 1 && !closed) {
        // While degraded the subscription is left to recovery (subscribeAll includes every room channel).
        const pending = degraded
          ? Promise.resolve()
          : (sharded ? sub.ssubscribe(ch) : sub.subscribe(ch)).then(
              () => {},
              (err: unknown) => {
                logger.warn(
                  { err: err instanceof Error ? err.message : String(err) },
                  'room subscribe failed',
                );
                // Not left as it is: the probe finds the channel silent and recovery subscribes it again.
                probeSoon();
              },
            );
        joining.set(ch, pending);
        void pending.finally(() => {
          if (joining.get(ch) === pending) joining.delete(ch);
        });
      }
      await joining.get(ch);
      let left = false;
      return () => {
        if (left) return;
        left = true;
        off();
        const rest = (dynamic.get(ch) ?? 1) - 1;
        if (rest > 0) {
          dynamic.set(ch, rest);
          return;
        }
        dynamic.delete(ch);
        subscribed.delete(ch);
        if (closed || sub.status !== 'ready') return;
        // Commands on the subscriber connection run in order: a re-join right after queues behind this.
        void (sharded ? sub.sunsubscribe(ch) : sub.unsubscribe(ch)).catch(() => {});
      };
    },
    isDegraded: () => degraded,
    stats: () => counters.snapshot(),
    async start(timeoutMs = 2_000) {
      scheduleProbe(PROBE_RETRY_MS);
      if (allReady()) {
        await recover();
        return;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, timeoutMs);
        timer.unref();
        const unsubscribe = bus.onRecovered(done);
        function done() {
          clearTimeout(timer);
          unsubscribe();
          resolve();
        }
      });
    },
    onRecovered(handler) {
      recoveredHandlers.add(handler);
      return () => recoveredHandlers.delete(handler);
    },
    onDegraded(handler) {
      degradedHandlers.add(handler);
      return () => degradedHandlers.delete(handler);
    },
    async close() {
      if (closed) return;
      closed = true;
      clearTimeout(probeTimer);
      for (const [conn, event, fn] of listeners) conn.off(event, fn);
      sub.off(messageEvent, onMessage);
      local.clear();
      if (sub.status !== 'ready') return;
      if (sharded) await Promise.all(channels.all.map((ch) => sub.sunsubscribe(ch).catch(() => {})));
      else await sub.unsubscribe(...channels.all).catch(() => {});
    },
  };
  return bus;
}
