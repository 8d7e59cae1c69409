// Owns the notification use cases: queries, changes (each followed by cache invalidation and SSE events on the
// bus), and creation for one or many users (service/creation.ts: batched insert → events → delivery). Other features
// (admin, chat) create notifications through createForUser / createForUsers.
import { z } from 'zod';
import { notFound } from '../http/errors.js';
import type { Db } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import type { ReadRouter } from '../infra/read-replicas.js';
import type { Realtime } from '../realtime/index.js';
import type { Delivery } from './delivery.js';
import type { NotificationRepository, SeqEvent } from './repository.js';
import {
  type ActionUrlPolicy,
  type Counts,
  cachedPageSignature,
  type ListQuery,
  type ListResponse,
  ListResponseSchema,
  type NewNotification,
  type Notification,
  type Preferences,
  type PreferencesPatch,
} from './schemas.js';
import { type CreateOptions, createNotificationCreator } from './service/creation.js';
import { createEventPublisher } from './service/publisher.js';
import type { UnreadCache } from './unread-cache.js';

// Part of the service's handle: callers pass these options and read these results.
export type { BatchResult, CreateOptions } from './service/creation.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface NotificationServiceDeps {
  repo: NotificationRepository;
  unread: UnreadCache;
  /**
   * Where lists and counts are read (a replica that has the user's last change, else the primary); absent: the
   * primary. The position each read must see comes from `unread` (recorded there by every change).
   */
  reads?: ReadRouter<Pick<Db, 'execute'>>;
  realtime: Realtime;
  delivery: Delivery;
  policy: ActionUrlPolicy;
  logger: Logger;
  batchSize: number;
  /** BROADCAST_WRITE_CONCURRENCY: batch statements of one broadcast in flight at once. */
  writeConcurrency?: number;
  /** BUS_MAX_PAYLOAD_BYTES: bus messages are cut to fit, never dropped for size. */
  maxBusPayloadBytes: number;
}

export function createNotificationService(deps: NotificationServiceDeps) {
  const { repo, unread } = deps;
  const reads = deps.reads;
  /** Runs a replica-eligible read of the user's notifications where the router says (primary without one). */
  const routed = async <T>(
    userId: string,
    known: string | null | undefined,
    run: (via: Pick<Db, 'execute'> | undefined) => Promise<T>,
  ): Promise<T> => {
    if (!reads?.enabled) return run(undefined);
    const position = known === undefined ? await unread.position(userId) : known;
    return reads.read(position, (db) => run(db), 'notifications');
  };

  const publisher = createEventPublisher(deps);
  const creator = createNotificationCreator({ ...deps, publisher });
  const { validate } = creator;

  const notFoundError = () => notFound('Notification not found');
  const uuidOrNotFound = (id: string) => {
    if (!UUID.test(id)) throw notFoundError();
    return id.toLowerCase();
  };

  /** After a committed change: the cached count and first page go stale, then the events go out. */
  const changed = async (userId: string, events: SeqEvent[]) => {
    if (events.length > 0) await unread.invalidate([userId]);
    await publisher.publishUser(userId, events);
  };

  const list = async (
    userId: string,
    query: ListQuery,
    via?: Pick<Db, 'execute'>,
    knownTotal: number | null = null,
  ): Promise<ListResponse> => {
    const { rows, totalCount } = await repo.list(userId, query, via, knownTotal);
    const totalPages = Math.ceil(totalCount / query.limit);
    return {
      notifications: rows,
      pagination: {
        page: query.page,
        limit: query.limit,
        totalCount,
        totalPages,
        hasNextPage: query.page < totalPages,
        hasPreviousPage: query.page > 1,
      },
    };
  };

  return {
    list,

    /**
     * The list page serialised as the route's response schema encodes it. First pages without a type or search
     * filter come from the read cache (docs/architecture.md "First-page cache").
     */
    async listJson(userId: string, query: ListQuery): Promise<string> {
      const encode = (page: ListResponse) => JSON.stringify(z.encode(ListResponseSchema, page));
      const signature = cachedPageSignature(query);
      // The cache passes the position it read with the version.
      if (signature !== null)
        return unread.page(userId, signature, (position) =>
          routed(userId, position, async (via) => encode(await list(userId, query, via))),
        );
      // A search or type filter: the page and its own count, the position looked up (`undefined`).
      if (query.search || query.type)
        return routed(userId, undefined, async (via) => encode(await list(userId, query, via)));
      // Other pages: the total from the read cache when it holds it, else counted and kept for the next page
      // (docs/architecture.md "List totals and counts").
      return unread.pageWithTotal(userId, query.filter, (position, total) =>
        routed(userId, position, async (via) => {
          const page = await list(userId, query, via, total);
          return { value: encode(page), total: page.pagination.totalCount };
        }),
      );
    },

    /** From the read cache while no change came since they were read (docs/architecture.md "List totals and counts"). */
    counts: (userId: string): Promise<Counts> =>
      unread.counts(userId, (position) => routed(userId, position, (via) => repo.counts(userId, via))),

    unreadCount: (userId: string): Promise<number> => unread.get(userId),

    /**
     * Forgets these users' cached unread counts and first pages. For rows changed behind the service's back (a
     * data migration, a manual fix, test seeding); every change made through the service does this itself.
     */
    forgetCached: (userIds: string[]): Promise<void> => unread.invalidate(userIds),

    async setRead(userId: string, rawId: string, read: boolean): Promise<Notification> {
      const id = uuidOrNotFound(rawId);
      const result = await repo.setRead(userId, id, read);
      if (!result) throw notFoundError();
      if (result.changed) await changed(userId, result.events);
      return result.notification;
    },

    async markAllRead(userId: string): Promise<number> {
      const { updatedCount, events } = await repo.markAllRead(userId);
      if (updatedCount > 0) await changed(userId, events);
      return updatedCount;
    },

    async remove(userId: string, rawId: string): Promise<string> {
      // Canonical (lower-case) id in the response and the SSE event, whatever case the client sent.
      const id = uuidOrNotFound(rawId);
      const result = await repo.remove(userId, id);
      if (!result) throw notFoundError();
      await changed(userId, result.events);
      return id;
    },

    async removeAll(userId: string): Promise<number> {
      const { deletedCount, events } = await repo.removeAll(userId);
      if (deletedCount > 0) await changed(userId, events);
      return deletedCount;
    },

    getPreferences: (userId: string): Promise<Preferences> => repo.getPreferences(userId),
    updatePreferences: (userId: string, patch: PreferencesPatch): Promise<Preferences> =>
      repo.updatePreferences(userId, patch),

    /** Creates one notification for one user, publishes it and runs delivery. 404 when the user is gone. */
    async createForUser(userId: string, input: NewNotification, options: CreateOptions = {}) {
      const valid = validate(input);
      const { created, existing } = await creator.createBatch([userId], valid, options);
      const first = created[0] ?? existing[0];
      if (!first) throw notFound('User not found');
      return first;
    },

    /**
     * Creates the same notification for many users in batches of BROADCAST_BATCH_SIZE (one statement, one bus
     * message and one delivery pass per batch, pipelined). The caller filters out banned users.
     * `existingCount`: users an interrupted earlier run with the same `sourceKey` had already reached (not
     * created again).
     */
    createForUsers: (userIds: string[], input: NewNotification, options: CreateOptions = {}) =>
      creator.createInBatches([userIds], input, options),

    /** Same as createForUsers for an audience that arrives in pages (the admin broadcast's keyset walk). */
    createForUserBatches: (
      batches: AsyncIterable<string[]>,
      input: NewNotification,
      options: CreateOptions = {},
    ) => creator.createInBatches(batches, input, options),

    /** Checks input from code paths that did not go through a route schema (400 when invalid); creates nothing. */
    validate,
  };
}

export type NotificationService = ReturnType<typeof createNotificationService>;
