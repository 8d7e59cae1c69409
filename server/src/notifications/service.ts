// Owns the notification use cases: queries, changes (each followed by cache invalidation and SSE events on the
// bus), and creation for one or many users (batched insert → events → delivery). Other features (admin, chat)
// create notifications through createForUser / createForUsers.
import { AppError, notFound, validationError } from '../http/errors.js';
import type { Logger } from '../infra/logger.js';
import type { Realtime } from '../realtime/types.js';
import type { Delivery, DeliveryItem } from './delivery.js';
import {
  type BatchMessage,
  MAX_EVENTS_PER_USER_MESSAGE,
  MAX_ITEMS_PER_BUS_MESSAGE,
  NOTIFICATION_EVENTS_TOPIC,
  type NotificationBusMessage,
  type UserEventsMessage,
} from './events.js';
import { type NotificationRepository, publicNotification, type StoredNotification } from './repository.js';
import {
  type ActionUrlPolicy,
  assertActionUrls,
  type Counts,
  type ListQuery,
  type NewNotification,
  NewNotificationSchema,
  type Notification,
  type Preferences,
  type PreferencesPatch,
  type StrategyName,
} from './schemas.js';
import type { UnreadCache } from './unread-cache.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface CreateOptions {
  /** Delivery order override (CONTRACT §4); default sse, email, push. */
  strategies?: readonly StrategyName[];
}

export interface BatchResult {
  created: StoredNotification[];
  /** Requested users that did not exist any more when inserting. */
  missingUserIds: string[];
}

export interface NotificationServiceDeps {
  repo: NotificationRepository;
  unread: UnreadCache;
  realtime: Realtime;
  delivery: Delivery;
  policy: ActionUrlPolicy;
  logger: Logger;
  batchSize: number;
}

export function createNotificationService(deps: NotificationServiceDeps) {
  const { repo, unread, realtime, logger } = deps;

  const publish = async (msg: NotificationBusMessage) => {
    await realtime.bus.publish(NOTIFICATION_EVENTS_TOPIC, msg);
  };

  const publishUser = (userId: string, events: UserEventsMessage['events']) =>
    publish({ kind: 'user', userId, events });

  const notFoundError = () => notFound('NOT_FOUND', 'Notification not found');
  const uuidOrNotFound = (id: string) => {
    if (!UUID.test(id)) throw notFoundError();
    return id.toLowerCase();
  };

  /** Validates input from code paths that did not go through a route schema. */
  const validate = (input: NewNotification): NewNotification => {
    const parsed = NewNotificationSchema.safeParse(input);
    if (!parsed.success) {
      throw validationError(parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })));
    }
    assertActionUrls(parsed.data.metadata, deps.policy);
    return parsed.data;
  };

  /** Inserts one batch, invalidates counts, publishes one bus message, runs delivery. */
  const createBatch = async (
    userIds: string[],
    input: NewNotification,
    options: CreateOptions,
  ): Promise<BatchResult> => {
    const template = {
      type: input.type,
      title: input.title,
      content: input.content,
      metadata: (input.metadata ?? {}) as Record<string, unknown>,
    };
    const created = await repo.insertForUsers(userIds, template);
    const createdUsers = created.map((n) => n.userId);
    const createdSet = new Set(createdUsers);
    const missingUserIds = userIds.filter((id) => !createdSet.has(id));
    if (created.length === 0) return { created, missingUserIds };
    await unread.invalidate(createdUsers);
    try {
      const counts = await repo.unreadCounts(createdUsers);
      for (let i = 0; i < created.length; i += MAX_ITEMS_PER_BUS_MESSAGE) {
        const msg: BatchMessage = {
          kind: 'batch',
          template: { ...template, read: false },
          items: created.slice(i, i + MAX_ITEMS_PER_BUS_MESSAGE).map((n) => ({
            userId: n.userId,
            id: n.id,
            seq: n.seq,
            createdAt: n.createdAt,
            unreadCount: counts.get(n.userId) ?? 0,
          })),
        };
        await publish(msg);
      }
    } catch (err) {
      // The rows are committed; live updates are best effort (clients resync on reconnect).
      logger.warn({ err }, 'publishing created notifications failed');
    }
    const items: DeliveryItem[] = created.map((n) => ({
      notificationId: n.id,
      userId: n.userId,
      type: n.type,
      title: n.title,
      content: n.content,
    }));
    await deps.delivery.deliver(items, options.strategies);
    return { created, missingUserIds };
  };

  const unreadChanged = async (userId: string) => ({
    name: 'unread_count_changed' as const,
    data: { unreadCount: await unread.get(userId) },
  });

  return {
    async list(userId: string, query: ListQuery) {
      const { rows, totalCount } = await repo.list(userId, query);
      const totalPages = Math.ceil(totalCount / query.limit);
      return {
        notifications: rows.map(publicNotification),
        pagination: {
          page: query.page,
          limit: query.limit,
          totalCount,
          totalPages,
          hasNextPage: query.page < totalPages,
          hasPreviousPage: query.page > 1,
        },
      };
    },

    counts: (userId: string): Promise<Counts> => repo.counts(userId),

    unreadCount: (userId: string): Promise<number> => unread.get(userId),

    async setRead(userId: string, rawId: string, read: boolean): Promise<Notification> {
      const id = uuidOrNotFound(rawId);
      const result = await repo.setRead(userId, id, read);
      if (!result) throw notFoundError();
      const notification = publicNotification(result.notification);
      if (result.changed) {
        await unread.invalidate([userId]);
        await publishUser(userId, [
          { name: 'notification_updated', data: { notification } },
          await unreadChanged(userId),
        ]);
      }
      return notification;
    },

    async markAllRead(userId: string): Promise<number> {
      const updated = await repo.markAllRead(userId);
      if (updated.length > 0) {
        await unread.invalidate([userId]);
        // Every changed notification gets its notification_updated (CONTRACT §3), a bus message per
        // MAX_EVENTS_PER_USER_MESSAGE, then one unread_count_changed.
        for (let i = 0; i < updated.length; i += MAX_EVENTS_PER_USER_MESSAGE) {
          await publishUser(
            userId,
            updated.slice(i, i + MAX_EVENTS_PER_USER_MESSAGE).map((n) => ({
              name: 'notification_updated' as const,
              data: { notification: publicNotification(n) },
            })),
          );
        }
        await publishUser(userId, [await unreadChanged(userId)]);
      }
      return updated.length;
    },

    async remove(userId: string, rawId: string): Promise<string> {
      // Canonical (lower-case) id in the response and the SSE event, whatever case the client sent.
      const id = uuidOrNotFound(rawId);
      const result = await repo.remove(userId, id);
      if (!result) throw notFoundError();
      const events: UserEventsMessage['events'] = [
        { name: 'notification_deleted', data: { notificationId: id } },
      ];
      if (result.wasUnread) {
        await unread.invalidate([userId]);
        events.push(await unreadChanged(userId));
      }
      await publishUser(userId, events);
      return id;
    },

    async removeAll(userId: string): Promise<number> {
      const { deleted, unreadDeleted } = await repo.removeAll(userId);
      if (deleted > 0) {
        const events: UserEventsMessage['events'] = [
          { name: 'notifications_cleared', data: { deletedCount: deleted } },
        ];
        if (unreadDeleted > 0) {
          await unread.invalidate([userId]);
          events.push(await unreadChanged(userId));
        }
        await publishUser(userId, events);
      }
      return deleted;
    },

    getPreferences: (userId: string): Promise<Preferences> => repo.getPreferences(userId),
    updatePreferences: (userId: string, patch: PreferencesPatch): Promise<Preferences> =>
      repo.updatePreferences(userId, patch),

    /** Validates action URLs against the allowlist (routes call this after schema validation). */
    assertActionUrls: (input: NewNotification) => assertActionUrls(input.metadata, deps.policy),

    /** Creates one notification for one user, publishes it and runs delivery. 404 when the user is gone. */
    async createForUser(userId: string, input: NewNotification, options: CreateOptions = {}) {
      const valid = validate(input);
      const { created } = await createBatch([userId], valid, options);
      const first = created[0];
      if (!first) throw new AppError(404, 'NOT_FOUND', 'User not found');
      return publicNotification(first);
    },

    /**
     * Creates the same notification for many users in batches of BROADCAST_BATCH_SIZE (one multi-row insert,
     * one bus message and one delivery pass per batch). The caller filters out banned users.
     */
    async createForUsers(
      userIds: string[],
      input: NewNotification,
      options: CreateOptions = {},
    ): Promise<{ createdCount: number; missingUserIds: string[] }> {
      const valid = validate(input);
      let createdCount = 0;
      const missing: string[] = [];
      for (let i = 0; i < userIds.length; i += deps.batchSize) {
        const r = await createBatch(userIds.slice(i, i + deps.batchSize), valid, options);
        createdCount += r.created.length;
        missing.push(...r.missingUserIds);
      }
      return { createdCount, missingUserIds: missing };
    },

    /** One batch without re-validation, for callers that stream users (admin "all" keyset walk). */
    createBatchValidated: (userIds: string[], input: NewNotification, options: CreateOptions = {}) =>
      createBatch(userIds, input, options),
    validate,
  };
}

export type NotificationService = ReturnType<typeof createNotificationService>;
