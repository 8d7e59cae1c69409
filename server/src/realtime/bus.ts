// The bus contract, the shared local fan-out and the two local-only buses (docs/architecture.md, "Real-time core").
import { randomUUID } from 'node:crypto';

export interface Envelope<T = unknown> {
  v: 1;
  id: string;
  topic: string;
  instanceId: string;
  sentAt: number;
  payload: T;
}

/**
 * Local subscribers receive the published object itself (no copy); remote ones a parsed copy. Handlers must
 * treat payloads as read-only.
 */
export type BusHandler<T = unknown> = (payload: T, envelope: Envelope<T>) => void;

export interface BusStats {
  /** Publish calls (delivered locally at once; sent to the store when distributed and not degraded). */
  messagesPublished: number;
  /** Valid messages received from other instances (after echo and duplicate suppression). */
  messagesReceived: number;
  /** Publishes that could not reach the store (error, oversize, unserialisable). */
  publishFailures: number;
  malformedDropped: number;
  duplicatesDropped: number;
  /** Own messages coming back from the store, skipped. */
  echoesSkipped: number;
  /** Receive time − sentAt over every received message. */
  averageLatencyMs: number;
  maxLatencyMs: number;
  latencySumMs: number;
  latencyCount: number;
  /** Times the bus entered degraded mode. */
  degradedTransitions: number;
}

export interface Bus {
  readonly instanceId: string;
  /**
   * Delivers to local subscribers at once, and to other instances when distributed. Never throws. Resolves
   * false when the message reached this instance only although other instances may exist (the bus was degraded,
   * the store refused the send, the message could not be encoded or was over the bus bound), so a caller whose
   * receivers would otherwise never notice the loss can make up for it (chat's room resync); true otherwise.
   */
  publish<T>(topic: string, payload: T): Promise<boolean>;
  /** Returns an unsubscribe function. */
  subscribe<T>(topic: string, handler: BusHandler<T>): () => void;
  /**
   * Subscribes to a topic that travels on a channel of its own (a chat room, `chat.room.<id>`): this instance
   * listens on that channel only while it has a handler for the topic, so a message reaches only the instances
   * that want it. Resolves once messages published from then on reach this instance (at once for a local bus;
   * once the store confirmed the subscription, or failed to, for the Redis bus). Returns the unsubscribe function.
   */
  join<T>(topic: string, handler: BusHandler<T>): Promise<() => void>;
  isDegraded(): boolean;
  stats(): BusStats;
  close(): Promise<void>;
}

export function createEnvelope<T>(instanceId: string, topic: string, payload: T): Envelope<T> {
  return { v: 1, id: randomUUID(), topic, instanceId, sentAt: Date.now(), payload };
}

/** Counters behind BusStats, shared by the implementations. */
export class BusCounters {
  published = 0;
  received = 0;
  publishFailures = 0;
  malformed = 0;
  duplicates = 0;
  echoes = 0;
  latencySum = 0;
  latencyCount = 0;
  latencyMax = 0;
  degradedTransitions = 0;

  /** `onLatencySeconds` feeds the Prometheus histogram (ops/prometheus.ts) with each sample. */
  constructor(private readonly onLatencySeconds?: (seconds: number) => void) {}

  recordLatency(ms: number): void {
    // Clocks of two machines can disagree by a little; a negative latency means "as good as instant".
    const value = Math.max(0, ms);
    this.onLatencySeconds?.(value / 1000);
    this.latencySum += value;
    this.latencyCount++;
    if (value > this.latencyMax) this.latencyMax = value;
  }

  snapshot(): BusStats {
    return {
      messagesPublished: this.published,
      messagesReceived: this.received,
      publishFailures: this.publishFailures,
      malformedDropped: this.malformed,
      duplicatesDropped: this.duplicates,
      echoesSkipped: this.echoes,
      averageLatencyMs:
        this.latencyCount === 0 ? 0 : Math.round((this.latencySum / this.latencyCount) * 100) / 100,
      maxLatencyMs: this.latencyMax,
      latencySumMs: this.latencySum,
      latencyCount: this.latencyCount,
      degradedTransitions: this.degradedTransitions,
    };
  }
}

/** Local fan-out shared by every implementation; a throwing handler never affects the others. */
export class LocalDispatcher {
  private readonly handlers = new Map<string, Set<BusHandler<unknown>>>();
  constructor(private readonly onHandlerError: (topic: string, err: unknown) => void) {}

  subscribe<T>(topic: string, handler: BusHandler<T>): () => void {
    let set = this.handlers.get(topic);
    if (!set) {
      set = new Set();
      this.handlers.set(topic, set);
    }
    set.add(handler as BusHandler<unknown>);
    return () => {
      set.delete(handler as BusHandler<unknown>);
      if (set.size === 0 && this.handlers.get(topic) === set) this.handlers.delete(topic);
    };
  }

  topics(): string[] {
    return [...this.handlers.keys()];
  }

  dispatch(envelope: Envelope<unknown>): void {
    const set = this.handlers.get(envelope.topic);
    if (!set) return;
    for (const handler of set) {
      try {
        handler(envelope.payload, envelope);
      } catch (err) {
        this.onHandlerError(envelope.topic, err);
      }
    }
  }

  clear(): void {
    this.handlers.clear();
  }
}

/**
 * Local-only bus over a dispatcher. `degraded` only changes what isDegraded() reports: the in-process bus is a
 * healthy single instance, the fallback is a distributed instance that lost its store.
 */
export function createLocalBus(
  instanceId: string,
  local: LocalDispatcher,
  counters: BusCounters,
  degraded: boolean,
): Bus {
  let closed = false;
  return {
    instanceId,
    async publish(topic, payload) {
      if (closed) return !degraded;
      counters.published++;
      local.dispatch(createEnvelope(instanceId, topic, payload));
      // The degraded fallback reached this instance only; a bus without a store has no one else to reach.
      return !degraded;
    },
    subscribe: (topic, handler) => local.subscribe(topic, handler),
    join: async (topic, handler) => local.subscribe(topic, handler),
    isDegraded: () => degraded,
    stats: () => counters.snapshot(),
    async close() {
      closed = true;
      local.clear();
    },
  };
}

/** Single-instance bus for the embedded default: local delivery only. */
export function createMemoryBus(
  instanceId: string,
  onHandlerError: (topic: string, err: unknown) => void,
): Bus {
  return createLocalBus(instanceId, new LocalDispatcher(onHandlerError), new BusCounters(), false);
}

/** The degraded fallback on its own (the Redis bus embeds one sharing its dispatcher and counters). */
export function createDegradedBus(
  instanceId: string,
  onHandlerError: (topic: string, err: unknown) => void,
): Bus {
  return createLocalBus(instanceId, new LocalDispatcher(onHandlerError), new BusCounters(), true);
}
