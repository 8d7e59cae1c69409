// Owns the Redis bus and its degraded fallback (docs/architecture.md, "Real-time core" and "Redis Cluster"): the
// degraded/recovered state machine, publishing and receiving envelopes. The subscriptions are
// redis-bus/channels.ts; the cluster's end-to-end probe of every channel is redis-bus/probe.ts.
import type { Logger } from '../infra/logger.js';
import type { StoreClient } from '../infra/store.js';
import { type Bus, BusCounters, createEnvelope, createLocalBus, LocalDispatcher } from './bus.js';
import { createDedup } from './dedup.js';
import { createRateLimitedLog, isValidTopic, parseEnvelope } from './envelope.js';
import { busChannels, channelFor } from './keys.js';
import { createBusChannels } from './redis-bus/channels.js';
import { createShardProbe, PROBE_RETRY_MS } from './redis-bus/probe.js';

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

export function createRedisBus(options: RedisBusOptions): RedisBus {
  const { instanceId, pub, sub, logger } = options;
  const sharded = options.sharded === true;
  const channels = busChannels(options.channel, options.notificationChannels);
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
  /** Cluster: channels whose last probe failed (undefined: unknown, e.g. degraded by a connection event). */
  let suspect: string[] | undefined;

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
  const send = (ch: string, raw: string) => (sharded ? pub.spublish(ch, raw) : pub.publish(ch, raw));

  const subscriptions = createBusChannels({
    sub,
    sharded,
    fixed: channels.all,
    logger,
    isDegraded: () => degraded,
    isClosed: () => closed,
    onSubscribeFailed: () => prober.soon(),
  });

  const recover = () => {
    if (closed || !degraded || recovering || !allReady()) return recovering;
    recovering = (async () => {
      try {
        // Idempotent: ioredis may have re-subscribed already; the server confirms either way.
        await subscriptions.subscribeAll(!everSubscribed, suspect);
        // On a cluster "ready" says little about each shard: only our own probe coming back on every channel
        // proves that publishing and receiving work again.
        if (sharded) {
          // Room channels that failed their probe are checked again along with the fixed ones.
          const joined = new Set(subscriptions.joined());
          const rooms = (suspect ?? []).filter((ch) => joined.has(ch));
          suspect = await prober.probe([...channels.all, ...rooms]);
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

  const prober = createShardProbe({
    instanceId,
    logger,
    enabled: sharded,
    fixed: channels.all,
    intervalMs: options.probeIntervalMs ?? 5_000,
    send,
    joined: subscriptions.joined,
    isSubscribed: subscriptions.isSubscribed,
    isDegraded: () => degraded,
    allReady,
    recover,
    onSilent: (failed) => {
      suspect = failed;
      enterDegraded('a store shard stopped carrying bus messages');
    },
  });

  const onDown = (role: string) => () => {
    // Which channels survived is unknown after a lost connection: recovery re-checks them all.
    suspect = undefined;
    enterDegraded(`${role} connection lost`);
  };
  const onReady = () => {
    void recover()?.catch(() => {});
  };
  const probeSoon = () => prober.soon();
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
    if (!subscriptions.isSubscribed(ch)) return;
    if (prober.receive(raw)) return;
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
      if (closed) return true;
      if (degraded) {
        await fallback.publish(topic, payload);
        return false;
      }
      counters.published++;
      const envelope = createEnvelope(instanceId, topic, payload);
      let raw: string;
      try {
        if (!isValidTopic(topic)) throw new Error(`invalid topic "${String(topic).slice(0, 64)}"`);
        raw = JSON.stringify(envelope);
      } catch (err) {
        local.dispatch(envelope);
        counters.publishFailures++;
        logger.error({ topic, err }, 'bus message could not be serialised; delivered locally only');
        return false;
      }
      // Receivers drop anything above the bound, so there is no point sending it.
      if (Buffer.byteLength(raw) > options.maxPayloadBytes) {
        local.dispatch(envelope);
        counters.publishFailures++;
        logger.error({ topic, bytes: raw.length }, 'bus message too large; delivered locally only');
        return false;
      }
      // The command is written to the store's socket first, local delivery second: local handlers run
      // synchronously (a chat message is framed for every local socket), and the other instances' copy should
      // not wait behind that work.
      let sent: Promise<unknown>;
      try {
        sent = send(channelFor(channels, topic, payload, envelope.id), raw);
      } catch (err) {
        sent = Promise.reject(err);
      }
      local.dispatch(envelope);
      try {
        await sent;
        return true;
      } catch (err) {
        counters.publishFailures++;
        logger.warn({ topic, err: err instanceof Error ? err.message : String(err) }, 'bus publish failed');
        probeSoon();
        return false;
      }
    },
    subscribe: (topic, handler) => local.subscribe(topic, handler),
    async join(topic, handler) {
      const off = local.subscribe(topic, handler);
      const ch = channelFor(channels, topic, undefined, '');
      await subscriptions.join(ch);
      let left = false;
      return () => {
        if (left) return;
        left = true;
        off();
        subscriptions.leave(ch);
      };
    },
    isDegraded: () => degraded,
    stats: () => counters.snapshot(),
    async start(timeoutMs = 2_000) {
      prober.schedule(PROBE_RETRY_MS);
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
      prober.stop();
      for (const [conn, event, fn] of listeners) conn.off(event, fn);
      sub.off(messageEvent, onMessage);
      local.clear();
      if (sub.status !== 'ready') return;
      await subscriptions.unsubscribeFixed();
    },
  };
  return bus;
}
