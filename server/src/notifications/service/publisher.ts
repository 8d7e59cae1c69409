// Owns putting committed notification events on the bus: per-user changes and created batches cut by serialised
// bytes to fit BUS_MAX_PAYLOAD_BYTES, and a `sync` ("read the log up to seq") for anything too large even alone.
// Never throws: the rows and the event log are committed, and streams that miss a message repair the gap from
// the log (docs/architecture.md, "Ordering and convergence").
import type { Logger } from '../../infra/logger.js';
import type { Realtime } from '../../realtime/index.js';
import {
  type BatchMessage,
  MAX_EVENTS_PER_USER_MESSAGE,
  NOTIFICATION_EVENTS_TOPIC,
  type NotificationBusMessage,
  type SyncMessage,
} from '../events.js';
import type { CreatedNotification, SeqEvent } from '../repository.js';

export interface EventPublisherDeps {
  realtime: Realtime;
  logger: Logger;
  /** BUS_MAX_PAYLOAD_BYTES: bus messages are cut to fit, never dropped for size. */
  maxBusPayloadBytes: number;
}

const byteLength = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

export function createEventPublisher(deps: EventPublisherDeps) {
  const { realtime, logger } = deps;
  // Headroom for the envelope and for the estimate below being per item rather than exact.
  const budget = Math.max(512, Math.floor(deps.maxBusPayloadBytes * 0.9));

  const publish = async (msg: NotificationBusMessage) => {
    try {
      await realtime.bus.publish(NOTIFICATION_EVENTS_TOPIC, msg);
    } catch (err) {
      logger.warn({ err, kind: msg.kind }, 'publishing notification events failed; streams will catch up');
    }
  };

  const publishSync = async (users: SyncMessage['users']) => {
    // ~60 bytes per user; chunked so even a huge sync fits.
    const per = Math.max(1, Math.floor(budget / 80));
    for (let i = 0; i < users.length; i += per)
      await publish({ kind: 'sync', users: users.slice(i, i + per) });
  };

  return {
    /** One user's events in as few messages as fit the bus; an event too large alone is sent as a sync. */
    async publishUser(userId: string, events: SeqEvent[]): Promise<void> {
      const base = byteLength({ kind: 'user', userId, events: [] });
      let chunk: SeqEvent[] = [];
      let size = base;
      const flush = async () => {
        if (chunk.length > 0) await publish({ kind: 'user', userId, events: chunk });
        chunk = [];
        size = base;
      };
      for (const event of events) {
        const bytes = byteLength(event) + 1;
        if (base + bytes > budget) {
          await flush();
          await publishSync([{ userId, seq: event.seq }]);
          continue;
        }
        if (size + bytes > budget || chunk.length >= MAX_EVENTS_PER_USER_MESSAGE) await flush();
        chunk.push(event);
        size += bytes;
      }
      await flush();
    },

    /** A created batch: the shared template once per message, items cut to fit. */
    async publishCreated(template: BatchMessage['template'], created: CreatedNotification[]): Promise<void> {
      const items: BatchMessage['items'] = created.map((c) => ({
        userId: c.notification.userId,
        id: c.notification.id,
        seq: c.seq,
        createdAt: c.notification.createdAt,
        unreadCount: c.unreadCount,
      }));
      const base = byteLength({ kind: 'batch', template, items: [] });
      const itemBytes = items.reduce((max, item) => Math.max(max, byteLength(item) + 1), 0);
      const per = Math.floor((budget - base) / Math.max(1, itemBytes));
      if (per < 1) {
        // The content alone does not fit a bus message: hubs read it from the log.
        await publishSync(items.map((i) => ({ userId: i.userId, seq: i.seq + 1 })));
        return;
      }
      for (let i = 0; i < items.length; i += per) {
        await publish({ kind: 'batch', template, items: items.slice(i, i + per) });
      }
    },
  };
}

export type EventPublisher = ReturnType<typeof createEventPublisher>;
