// Owns delivery: strategy objects tried in priority order over whole batches; the first that reaches a user wins
// (docs/api.md#notifications-notification-session-cookie, docs/architecture.md "Delivery").

import type { Logger } from '../infra/logger.js';
import type { Presence } from '../realtime/index.js';
import type { EmailRecipient, NotificationRepository } from './repository.js';
import { DELIVERY_STRATEGIES, type StrategyName } from './schemas.js';

export interface DeliveryItem {
  notificationId: string;
  userId: string;
  type: string;
  title: string;
  content: string;
}

export interface DeliveryStrategy {
  readonly name: StrategyName;
  /** Attempts delivery; returns the user ids it delivered to (or queued durable delivery for). */
  deliver(items: DeliveryItem[]): Promise<Set<string>>;
}

export function sseStrategy(presence: Presence): DeliveryStrategy {
  return {
    name: 'sse',
    // Cluster-wide presence: a stream on any instance counts, since the bus carries the event there.
    async deliver(items) {
      return presence.onlineAmong([...new Set(items.map((i) => i.userId))]);
    },
  };
}

/** The email feature's side of the email strategy (email/notification-emails.ts). */
export interface NotificationEmails {
  /**
   * Renders and queues the emails of one notification content for its recipients (each in their locale, with
   * their own unsubscribe link), or schedules them into digests for those who chose one.
   */
  queue(
    recipients: EmailRecipient[],
    content: { type: string; title: string; content: string },
  ): Promise<void>;
}

export function emailStrategy(deps: {
  repo: NotificationRepository;
  emails: NotificationEmails;
}): DeliveryStrategy {
  return {
    name: 'email',
    async deliver(items) {
      // A batch normally shares one content (a broadcast): recipients are filtered in SQL once per distinct
      // content (verified address, emailEnabled, the type in emailTypes), then rendered once per locale. The
      // in-app notification is unaffected either way.
      const groups = new Map<string, DeliveryItem[]>();
      for (const item of items) {
        const key = JSON.stringify([item.type, item.title, item.content]);
        const group = groups.get(key);
        if (group) group.push(item);
        else groups.set(key, [item]);
      }
      const delivered = new Set<string>();
      for (const group of groups.values()) {
        const first = group[0];
        if (!first) continue;
        const recipients = await deps.repo.emailRecipients(group, first.type);
        // One email (or digest entry) per notification, however many instances or retries try to queue it.
        await deps.emails.queue(recipients, { type: first.type, title: first.title, content: first.content });
        for (const r of recipients) delivered.add(r.userId);
      }
      return delivered;
    },
  };
}

export interface DeliveryResult {
  /** user id → the strategy that delivered, or null when none did. */
  byUser: Map<string, StrategyName | null>;
  /** Milliseconds each strategy that ran took (debug breakdown). */
  timings: Partial<Record<StrategyName, number>>;
}

export function createDelivery(strategies: DeliveryStrategy[], logger: Logger) {
  const byName = new Map(strategies.map((s) => [s.name, s]));
  return {
    defaultOrder: DELIVERY_STRATEGIES as readonly StrategyName[],
    /** Runs the strategies in `order` (default priority order). Failures are logged, never thrown. */
    async deliver(
      items: DeliveryItem[],
      order: readonly StrategyName[] = DELIVERY_STRATEGIES,
    ): Promise<DeliveryResult> {
      const byUser = new Map<string, StrategyName | null>(items.map((i) => [i.userId, null]));
      const timings: DeliveryResult['timings'] = {};
      let remaining = items;
      for (const name of new Set(order)) {
        if (remaining.length === 0) break;
        const strategy = byName.get(name);
        if (!strategy) continue;
        let delivered: Set<string>;
        const start = performance.now();
        try {
          delivered = await strategy.deliver(remaining);
          timings[name] = performance.now() - start;
        } catch (err) {
          // An undeliverable channel never fails the notification itself; the next strategy gets its chance.
          logger.warn({ err, strategy: name, users: remaining.length }, 'delivery strategy failed');
          continue;
        }
        for (const id of delivered) byUser.set(id, name);
        remaining = remaining.filter((i) => !delivered.has(i.userId));
      }
      return { byUser, timings };
    },
  };
}

export type Delivery = ReturnType<typeof createDelivery>;
