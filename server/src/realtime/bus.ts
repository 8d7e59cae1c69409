// The bus contract every cross-instance feature uses. Implementations: in-process (this file), Redis and the
// degraded fallback (realtime issue). Features never touch Redis pub/sub directly.
import { randomUUID } from 'node:crypto';

export interface Envelope<T = unknown> {
  v: 1;
  id: string;
  topic: string;
  instanceId: string;
  sentAt: number;
  payload: T;
}

export type BusHandler<T = unknown> = (payload: T, envelope: Envelope<T>) => void;

export interface BusStats {
  messagesPublished: number;
  messagesReceived: number;
  publishFailures: number;
  malformedDropped: number;
  duplicatesDropped: number;
  averageLatencyMs: number;
  maxLatencyMs: number;
}

export interface Bus {
  readonly instanceId: string;
  /** Delivers to local subscribers at once, and to other instances when distributed. Never throws. */
  publish<T>(topic: string, payload: T): Promise<void>;
  /** Returns an unsubscribe function. */
  subscribe<T>(topic: string, handler: BusHandler<T>): () => void;
  isDegraded(): boolean;
  stats(): BusStats;
  close(): Promise<void>;
}

export function createEnvelope<T>(instanceId: string, topic: string, payload: T): Envelope<T> {
  return { v: 1, id: randomUUID(), topic, instanceId, sentAt: Date.now(), payload };
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
      if (set.size === 0) this.handlers.delete(topic);
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
}

/** Single-instance bus for the embedded default: local delivery only. */
export function createMemoryBus(
  instanceId: string,
  onHandlerError: (topic: string, err: unknown) => void,
): Bus {
  const local = new LocalDispatcher(onHandlerError);
  let published = 0;
  return {
    instanceId,
    async publish(topic, payload) {
      published++;
      local.dispatch(createEnvelope(instanceId, topic, payload));
    },
    subscribe: (topic, handler) => local.subscribe(topic, handler),
    isDegraded: () => false,
    stats: () => ({
      messagesPublished: published,
      messagesReceived: 0,
      publishFailures: 0,
      malformedDropped: 0,
      duplicatesDropped: 0,
      averageLatencyMs: 0,
      maxLatencyMs: 0,
    }),
    async close() {},
  };
}
