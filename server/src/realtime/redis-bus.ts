// Owns the Redis bus and its degraded fallback (docs/architecture.md, "Real-time core").
import type { Redis } from 'ioredis';
import type { Logger } from '../infra/logger.js';
import { type Bus, BusCounters, createEnvelope, createLocalBus, LocalDispatcher } from './bus.js';
import { createDedup } from './dedup.js';
import { createRateLimitedLog, isValidTopic, parseEnvelope } from './envelope.js';

export interface RedisBusOptions {
  instanceId: string;
  pub: Redis;
  sub: Redis;
  /** Other connections whose loss also means degraded mode (the data connection used by presence). */
  watch?: Redis[];
  /** Full channel name, already prefixed with the store prefix. */
  channel: string;
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
  const { instanceId, pub, sub, channel, logger } = options;
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
        await sub.subscribe(channel);
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

  const onDown = (role: string) => () => enterDegraded(`${role} connection lost`);
  const onReady = () => {
    void recover()?.catch(() => {});
  };
  const listeners: Array<[Redis, string, (...args: unknown[]) => void]> = [];
  connections.forEach((conn, i) => {
    const role = i === 0 ? 'publish' : i === 1 ? 'subscribe' : 'data';
    const down = onDown(role);
    for (const event of ['close', 'end', 'reconnecting']) listeners.push([conn, event, down]);
    listeners.push([conn, 'ready', onReady]);
  });
  for (const [conn, event, fn] of listeners) conn.on(event, fn);

  const onMessage = (ch: string, raw: string) => {
    if (ch !== channel) return;
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
  sub.on('message', onMessage);

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
        await pub.publish(channel, raw);
      } catch (err) {
        counters.publishFailures++;
        logger.warn({ topic, err: err instanceof Error ? err.message : String(err) }, 'bus publish failed');
      }
    },
    subscribe: (topic, handler) => local.subscribe(topic, handler),
    isDegraded: () => degraded,
    stats: () => counters.snapshot(),
    async start(timeoutMs = 2_000) {
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
      for (const [conn, event, fn] of listeners) conn.off(event, fn);
      sub.off('message', onMessage);
      local.clear();
      if (sub.status === 'ready') await sub.unsubscribe(channel).catch(() => {});
    },
  };
  return bus;
}
