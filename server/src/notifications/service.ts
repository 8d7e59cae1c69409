// Owns the notification use cases: queries, changes (each followed by cache invalidation and SSE events on the
// bus), and creation for one or many users (batched insert → events → delivery). Other features (admin, chat)
// create notifications through createForUser / createForUsers.
import { z } from 'zod';
import { notFound, validationError } from '../http/errors.js';
import type { Db } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import type { ReadRouter } from '../infra/read-replicas.js';
import type { Realtime } from '../realtime/index.js';
import type { Delivery, DeliveryItem } from './delivery.js';
import {
  type BatchMessage,
  MAX_EVENTS_PER_USER_MESSAGE,
  NOTIFICATION_EVENTS_TOPIC,
  type NotificationBusMessage,
  type SyncMessage,
} from './events.js';
import type { CreatedNotification, NewRowTemplate, NotificationRepository, SeqEvent } from './repository.js';
import {
  type ActionUrlPolicy,
  assertActionUrls,
  type Counts,
  cachedPageSignature,
  type ListQuery,
  type ListResponse,
  ListResponseSchema,
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
  /** Delivery order override (docs/api.md#notifications-notification-session-cookie); default sse, email, push. */
  strategies?: readonly StrategyName[];
  /**
   * Makes the send idempotent per user: a user who already has a notification from this key is not sent
   * another (a broadcast resumed after a crash). Such users are reported in \`existing\`.
   */
  sourceKey?: string;
  /** Called after each batch commits (an asynchronous send reports its progress from it). */
  onBatch?: (batch: { created: number; existing: number; missingUserIds: string[] }) => void;
  /**
   * Checked before each batch: once aborted (shutdown cut the request short) no further batch is written and
   * the send throws the signal's reason. Batches already written keep their events and delivery.
   */
  signal?: AbortSignal;
}

export interface BatchResult {
  created: Notification[];
  /** Users who already had this sourceKey's notification (only with a sourceKey). */
  existing: Notification[];
  /** Requested users that did not exist any more when inserting. */
  missingUserIds: string[];
}

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
  /** BUS_MAX_PAYLOAD_BYTES: bus messages are cut to fit, never dropped for size. */
  maxBusPayloadBytes: number;
}

const byteLength = (value: unknown) => Buffer.byteLength(JSON.stringify(value));

export function createNotificationService(deps: NotificationServiceDeps) {
  const { repo, unread, realtime, logger } = deps;
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

  // Headroom for the envelope and for the estimate below being per item rather than exact.
  const budget = Math.max(512, Math.floor(deps.maxBusPayloadBytes * 0.9));

  /**
   * Publishes committed events. Never throws: the rows and the event log are committed, and streams that
   * miss a message repair the gap from the log (docs/architecture.md, "Ordering and convergence").
   */
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

  /** One user's events in as few messages as fit the bus; an event too large alone is sent as a sync. */
  const publishUser = async (userId: string, events: SeqEvent[]) => {
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
  };

  /** A created batch: the shared template once per message, items cut to fit. */
  const publishCreated = async (template: BatchMessage['template'], created: CreatedNotification[]) => {
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
  };

  const notFoundError = () => notFound('Notification not found');
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

  /** A batch whose rows, cursors and events are committed, waiting for its cache bump, bus message and delivery. */
  interface WrittenBatch {
    template: NewRowTemplate;
    created: CreatedNotification[];
    existing: Notification[];
    missingUserIds: string[];
    users: number;
    insertMs: number;
  }

  /** First half of a batch: one statement writes the rows, the cursor bumps and the event log. */
  const writeBatch = async (
    userIds: string[],
    input: NewNotification,
    options: CreateOptions,
  ): Promise<WrittenBatch> => {
    const template: NewRowTemplate = {
      type: input.type,
      title: input.title,
      content: input.content,
      metadata: (input.metadata ?? {}) as Record<string, unknown>,
    };
    const start = performance.now();
    const { created, existing } = await repo.insertForUsers(userIds, template, options.sourceKey);
    const insertMs = performance.now() - start;
    const done = new Set([...created.map((c) => c.notification.userId), ...existing.map((n) => n.userId)]);
    const missingUserIds = userIds.filter((id) => !done.has(id));
    return { template, created, existing, missingUserIds, users: userIds.length, insertMs };
  };

  /**
   * Second half: invalidates counts, publishes, runs delivery. Never throws: each step logs its own failure
   * (the rows are committed; streams repair from the log, delivery failures are per strategy).
   */
  const finishBatch = async (w: WrittenBatch, options: CreateOptions): Promise<void> => {
    const { created, existing } = w;
    const t1 = performance.now();
    let t2 = t1;
    if (created.length > 0) {
      await unread.invalidate(created.map((c) => c.notification.userId));
      t2 = performance.now();
      await publishCreated({ ...w.template, read: false }, created);
    }
    const t3 = performance.now();
    // Users reached by an interrupted earlier run go through delivery again: the outbox's per-notification
    // dedupe key keeps their email single, and one whose delivery never ran still gets it.
    const items: DeliveryItem[] = [...created.map((c) => c.notification), ...existing].map((n) => ({
      notificationId: n.id,
      userId: n.userId,
      type: n.type,
      title: n.title,
      content: n.content,
    }));
    const delivered = items.length > 0 ? await deps.delivery.deliver(items, options.strategies) : undefined;
    if (logger.level === 'debug' || logger.level === 'trace') {
      // Where a batch's time goes (bench/broadcast.ts --breakdown sums these lines).
      logger.debug(
        {
          users: w.users,
          insertMs: w.insertMs,
          unreadCacheMs: t2 - t1,
          publishMs: t3 - t2,
          deliveryMs: delivered?.timings ?? {},
        },
        'notification batch created',
      );
    }
  };

  const createBatch = async (
    userIds: string[],
    input: NewNotification,
    options: CreateOptions,
  ): Promise<BatchResult> => {
    const w = await writeBatch(userIds, input, options);
    await finishBatch(w, options);
    return {
      created: w.created.map((c) => c.notification),
      existing: w.existing,
      missingUserIds: w.missingUserIds,
    };
  };

  /**
   * Batches from `batches` (each at most BROADCAST_BATCH_SIZE users are written per statement), pipelined: batch
   * k + 1 is written while batch k's cache bump, bus message and delivery run, so PostgreSQL and the rest
   * overlap. At most one batch waits for its second half, which bounds memory whatever the audience.
   */
  const createInBatches = async (
    batches: AsyncIterable<string[]> | Iterable<string[]>,
    input: NewNotification,
    options: CreateOptions,
  ): Promise<{ createdCount: number; existingCount: number; missingUserIds: string[] }> => {
    const valid = validate(input);
    let createdCount = 0;
    let existingCount = 0;
    const missing: string[] = [];
    let tail: Promise<void> = Promise.resolve();
    let tailError: { err: unknown } | undefined;
    try {
      for await (const ids of batches) {
        for (let i = 0; i < ids.length; i += deps.batchSize) {
          options.signal?.throwIfAborted();
          const w = await writeBatch(ids.slice(i, i + deps.batchSize), valid, options);
          createdCount += w.created.length;
          existingCount += w.existing.length;
          missing.push(...w.missingUserIds);
          await tail;
          if (tailError) throw tailError.err;
          // Caught here and rethrown above, so a failing second half is never an unhandled rejection.
          tail = finishBatch(w, options).catch((err: unknown) => {
            tailError = { err };
          });
          // After the batch's delivery started: a callback that throws (a send stopping) leaves it delivered.
          options.onBatch?.({
            created: w.created.length,
            existing: w.existing.length,
            missingUserIds: w.missingUserIds,
          });
        }
      }
    } finally {
      // Even when a write failed, the batches already committed get their events and delivery.
      await tail;
    }
    if (tailError) throw tailError.err;
    return { createdCount, existingCount, missingUserIds: missing };
  };

  /** After a committed change: the cached count and first page go stale, then the events go out. */
  const changed = async (userId: string, events: SeqEvent[]) => {
    if (events.length > 0) await unread.invalidate([userId]);
    await publishUser(userId, events);
  };

  const list = async (userId: string, query: ListQuery, via?: Pick<Db, 'execute'>): Promise<ListResponse> => {
    const { rows, totalCount } = await repo.list(userId, query, via);
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
      // `position` undefined: look it up (uncached pages); the cache passes the one it read with the version.
      const load = (position?: string | null) =>
        routed(userId, position, async (via) =>
          JSON.stringify(z.encode(ListResponseSchema, await list(userId, query, via))),
        );
      const signature = cachedPageSignature(query);
      return signature === null ? load() : unread.page(userId, signature, load);
    },

    counts: (userId: string): Promise<Counts> => routed(userId, undefined, (via) => repo.counts(userId, via)),

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
      const { created, existing } = await createBatch([userId], valid, options);
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
      createInBatches([userIds], input, options),

    /** Same as createForUsers for an audience that arrives in pages (the admin broadcast's keyset walk). */
    createForUserBatches: (
      batches: AsyncIterable<string[]>,
      input: NewNotification,
      options: CreateOptions = {},
    ) => createInBatches(batches, input, options),

    /** Checks input from code paths that did not go through a route schema (400 when invalid); creates nothing. */
    validate,
  };
}

export type NotificationService = ReturnType<typeof createNotificationService>;
