// Owns delivery: strategy objects tried in priority order over whole batches; the first that reaches a user wins
// (docs/api.md#notifications-notification-session-cookie, docs/architecture.md "Delivery").

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
  /** Called after emails were queued, so a worker sends them now rather than at its next poll. */
  kick: () => void;
  feBaseUrl: string;
}): DeliveryStrategy {
  return {
    name: 'email',
    async deliver(items) {
      // A batch normally shares one content (a broadcast): the mail is rendered once per distinct content and
      // queued for all its recipients in one statement. Recipients are filtered in SQL: an unverified address
      // was typed by whoever signed up, not necessarily its owner, so Herald never mails notification content
      // (admin broadcasts included) there; then emailEnabled and the type in emailTypes. The in-app
      // notification is unaffected either way.
      const groups = new Map<string, DeliveryItem[]>();
      for (const item of items) {
        const key = JSON.stringify([item.type, item.title, item.content]);
        const group = groups.get(key);
        if (group) group.push(item);
        else groups.set(key, [item]);
      }
      const delivered = new Set<string>();
      let queued = 0;
      for (const group of groups.values()) {
        const first = group[0];
        if (!first) continue;
        const mail = notificationEmail({
          title: first.title,
          content: first.content,
          feBaseUrl: deps.feBaseUrl,
        });
        const r = await deps.repo.enqueueNotificationEmails(
          // One email per notification (dedupe key), however many instances or retries try to queue it.
          group.map((i) => ({ userId: i.userId, notificationId: i.notificationId })),
          first.type,
          mail,
        );
        for (const id of r.userIds) delivered.add(id);
        queued += r.queued;
      }
      if (queued > 0) deps.kick();
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
