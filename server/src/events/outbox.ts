// Owns the domain-event port: the one way a part of Herald announces what happened (`user.created`,
// `notification.created`, `chat.message.created`, `email.sent`, …). The writer calls `events.write(exec, [...])`
// inside the transaction that made the change; every consumer (webhooks today, Web Push and email digests next)
// attaches a sink that queues its own durable rows through the same executor, so a consumer sees an event exactly
// when its cause committed, and the writers never import a consumer.
//
// The catalogue is typed without this floor importing the features: each writer declares its events' payloads
// by augmenting `DomainEventMap` next to the code that writes them (`declare module '../events/outbox.js'`).
import type { Db } from '../infra/db.js';

/**
 * Event type → payload (the resource as the API returns it). Empty here on purpose: the writers augment it, so
 * the payload type lives with the schema it comes from.
 */
// biome-ignore lint/suspicious/noEmptyInterface: filled by declaration merging in the writing modules
export interface DomainEventMap {}

export type DomainEventType = keyof DomainEventMap;

export type DomainEvent = {
  [K in DomainEventType]: {
    type: K;
    data: DomainEventMap[K];
    /** When it happened (default: now). */
    at?: Date;
  };
}[DomainEventType];

/** A transaction or the pool: whatever made the change. */
export type Executor = Pick<Db, 'execute'>;

/** One consumer of the events: queues its own durable work in the writer's transaction. */
export interface EventSink {
  /** False when this consumer would queue nothing for the type (lets writers skip building payloads). */
  wants(type: DomainEventType): boolean;
  /** Queues what this consumer needs for the events; returns how many rows it queued. */
  write(exec: Executor, events: DomainEvent[]): Promise<number>;
}

export interface EventOutbox {
  /** True when some attached consumer wants the type. */
  wants(type: DomainEventType): boolean;
  /** Hands the events to every consumer that wants them, in the caller's transaction; returns rows queued. */
  write(exec: Executor, events: DomainEvent[]): Promise<number>;
  /** Adds a consumer (the composition root attaches them before the writers run). */
  attach(sink: EventSink): void;
}

export function createEventOutbox(): EventOutbox {
  const sinks: EventSink[] = [];
  return {
    wants: (type) => sinks.some((s) => s.wants(type)),
    async write(exec, events) {
      let queued = 0;
      // Sequential on purpose: a transaction runs one statement at a time.
      for (const sink of sinks) {
        const wanted = events.filter((e) => sink.wants(e.type));
        if (wanted.length > 0) queued += await sink.write(exec, wanted);
      }
      return queued;
    },
    attach(sink) {
      sinks.push(sink);
    },
  };
}
