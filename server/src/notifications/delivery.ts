// Owns delivery: strategy objects tried in priority order over whole batches; the first that reaches a user wins
// (docs/api.md#notifications-notification-session-cookie, docs/architecture.md "Delivery").

import type { EmailOutbox } from '../infra/email-outbox.js';
import type { Logger } from '../infra/logger.js';
import type { Presence } from '../realtime/index.js';
import { notificationEmail } from './email.js';
import type { NotificationRepository } from './repository.js';
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

export function emailStrategy(deps: {
  repo: NotificationRepository;
  outbox: EmailOutbox;
  feBaseUrl: string;
  /** The users among these whose email address is verified. */
  verifiedAmong: (userIds: string[]) => Promise<Set<string>>;
}): DeliveryStrategy {
  return {
    name: 'email',
    async deliver(items) {
      const userIds = [...new Set(items.map((i) => i.userId))];
      // An unverified address was typed by whoever signed up, not necessarily its owner: Herald never mails
      // notification content (admin broadcasts included) there. The in-app notification is unaffected.
      const verified = await deps.verifiedAmong(userIds);
      const targets = new Map(
        (await deps.repo.emailTargets(userIds.filter((id) => verified.has(id)))).map((t) => [t.userId, t]),
      );
      const delivered = new Set<string>();
      const emails = [];
      for (const item of items) {
        const target = targets.get(item.userId);
        if (!target?.emailEnabled || !target.emailTypes.includes(item.type)) continue;
        delivered.add(item.userId);
        emails.push({
          // One email per notification, however many instances or retries try to queue it.
          dedupeKey: `notification:${item.notificationId}`,
          ...notificationEmail({
            to: target.email,
            title: item.title,
            content: item.content,
            feBaseUrl: deps.feBaseUrl,
          }),
        });
      }
      await deps.outbox.enqueue(emails);
      return delivered;
    },
  };
}

/** Reserved: no push provider is implemented, so it never delivers and the next strategy is tried. */
export function pushStrategy(): DeliveryStrategy {
  return {
    name: 'push',
    async deliver() {
      return new Set();
    },
  };
}

export interface DeliveryResult {
  /** user id → the strategy that delivered, or null when none did. */
  byUser: Map<string, StrategyName | null>;
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
      let remaining = items;
      for (const name of new Set(order)) {
        if (remaining.length === 0) break;
        const strategy = byName.get(name);
        if (!strategy) continue;
        let delivered: Set<string>;
        try {
          delivered = await strategy.deliver(remaining);
        } catch (err) {
          // An undeliverable channel never fails the notification itself; the next strategy gets its chance.
          logger.warn({ err, strategy: name, users: remaining.length }, 'delivery strategy failed');
          continue;
        }
        for (const id of delivered) byUser.set(id, name);
        remaining = remaining.filter((i) => !delivered.has(i.userId));
      }
      return { byUser };
    },
  };
}

export type Delivery = ReturnType<typeof createDelivery>;
