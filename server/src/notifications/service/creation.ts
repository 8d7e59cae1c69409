// Owns creating notifications for one or many users: input validation for callers that did not go through a
// route schema, and the batched write (one statement per batch: rows, cursors, event log) followed by the
// batch's cache bump, bus message and delivery, pipelined so PostgreSQL and the rest overlap
// (docs/architecture.md "Broadcast at scale").
import { validationError } from '../../http/errors.js';
import type { Logger } from '../../infra/logger.js';
import type { Delivery, DeliveryItem } from '../delivery.js';
import type { CreatedNotification, NewRowTemplate, NotificationRepository } from '../repository.js';
import {
  type ActionUrlPolicy,
  assertActionUrls,
  type NewNotification,
  NewNotificationSchema,
  type Notification,
  type StrategyName,
} from '../schemas.js';
import type { UnreadCache } from '../unread-cache.js';
import type { EventPublisher } from './publisher.js';

export interface CreateOptions {
  /** Delivery order override (docs/api.md#notifications-notification-session-cookie); default sse, email, push. */
  strategies?: readonly StrategyName[];
  /**
   * Makes the send idempotent per user: a user who already has a notification from this key is not sent
   * another (a broadcast resumed after a crash). Such users are reported in `existing`.
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

export interface NotificationCreatorDeps {
  repo: NotificationRepository;
  unread: UnreadCache;
  publisher: EventPublisher;
  delivery: Delivery;
  policy: ActionUrlPolicy;
  logger: Logger;
  batchSize: number;
  /** Batch statements of one broadcast in flight at once (BROADCAST_WRITE_CONCURRENCY; 1 when absent). */
  writeConcurrency?: number;
}

/** A batch whose rows, cursors and events are committed, waiting for its cache bump, bus message and delivery. */
interface WrittenBatch {
  template: NewRowTemplate;
  created: CreatedNotification[];
  existing: Notification[];
  missingUserIds: string[];
  users: number;
  insertMs: number;
}

export function createNotificationCreator(deps: NotificationCreatorDeps) {
  const { repo, unread, publisher, logger } = deps;

  /** Validates input from code paths that did not go through a route schema. */
  const validate = (input: NewNotification): NewNotification => {
    const parsed = NewNotificationSchema.safeParse(input);
    if (!parsed.success) {
      throw validationError(parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })));
    }
    assertActionUrls(parsed.data.metadata, deps.policy);
    return parsed.data;
  };

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
   * Second half: invalidates counts then publishes, while delivery runs alongside. Never throws: each step logs
   * its own failure (the rows are committed; streams repair from the log, delivery failures are per strategy).
   */
  const finishBatch = async (w: WrittenBatch, options: CreateOptions): Promise<void> => {
    const { created, existing } = w;
    // Users reached by an interrupted earlier run go through delivery again: the outbox's per-notification
    // dedupe key keeps their email single, and one whose delivery never ran still gets it.
    const items: DeliveryItem[] = [...created.map((c) => c.notification), ...existing].map((n) => ({
      notificationId: n.id,
      userId: n.userId,
      type: n.type,
      title: n.title,
      content: n.content,
    }));
    // Delivery (who is online, email for the rest) needs nothing from the cache bump or the bus message, only
    // the committed rows: it starts at once and overlaps them (their store round trips and this instance's own
    // fan-out), which shortens each batch's second half, the chain every later batch waits behind. It never
    // throws (a strategy's failure is logged), and it is awaited below on every way out.
    const delivering = items.length > 0 ? deps.delivery.deliver(items, options.strategies) : undefined;
    const t1 = performance.now();
    let t2 = t1;
    let t3 = t1;
    let delivered: Awaited<typeof delivering>;
    try {
      if (created.length > 0) {
        await unread.invalidate(created.map((c) => c.notification.userId));
        t2 = performance.now();
        await publisher.publishCreated({ ...w.template, read: false }, created);
      }
      t3 = performance.now();
    } finally {
      delivered = await delivering;
    }
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

  /** One batch, both halves, for input already validated. */
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
   * Batches from `batches` (each at most BROADCAST_BATCH_SIZE users are written per statement), pipelined: up to
   * BROADCAST_WRITE_CONCURRENCY batch statements run at once (on their own pooled connections; the batches hold
   * disjoint users, whose cursor rows are the only locks they take), and each written batch's cache bump, bus
   * message and delivery run, in order, while the next ones are written. A broadcast's last recipients are reached
   * after about (batches × statement time) / concurrency instead of batches × statement time. At most
   * `concurrency` written batches wait for their second half, which bounds memory whatever the audience.
   */
  const createInBatches = async (
    batches: AsyncIterable<string[]> | Iterable<string[]>,
    input: NewNotification,
    options: CreateOptions,
  ): Promise<{ createdCount: number; existingCount: number; missingUserIds: string[] }> => {
    const valid = validate(input);
    const concurrency = Math.max(1, deps.writeConcurrency ?? 1);
    let createdCount = 0;
    let existingCount = 0;
    const missing: string[] = [];
    let tail: Promise<void> = Promise.resolve();
    let tailError: { err: unknown } | undefined;
    /** Writes started and not yet handed to their second half, oldest first. */
    const writing: Array<Promise<{ w: WrittenBatch } | { err: unknown }>> = [];
    let writeError: { err: unknown } | undefined;
    /** The oldest write's outcome: its second half queued behind the previous one's. */
    const settleOldest = async () => {
      const outcome = await writing.shift();
      if (!outcome) return;
      if ('err' in outcome) {
        writeError ??= outcome;
        return;
      }
      const { w } = outcome;
      createdCount += w.created.length;
      existingCount += w.existing.length;
      missing.push(...w.missingUserIds);
      await tail;
      // Caught here and rethrown by the caller, so a failing second half is never an unhandled rejection.
      tail = finishBatch(w, options).catch((err: unknown) => {
        tailError = { err };
      });
      // After the batch's delivery started: a callback that throws (a send stopping) leaves it delivered.
      options.onBatch?.({
        created: w.created.length,
        existing: w.existing.length,
        missingUserIds: w.missingUserIds,
      });
    };
    try {
      for await (const ids of batches) {
        for (let i = 0; i < ids.length; i += deps.batchSize) {
          options.signal?.throwIfAborted();
          if (writeError) throw writeError.err;
          if (tailError) throw tailError.err;
          // Settled through `writing` (never left unobserved): a failed write is recorded, not thrown here.
          writing.push(
            writeBatch(ids.slice(i, i + deps.batchSize), valid, options).then(
              (w) => ({ w }),
              (err: unknown) => ({ err }),
            ),
          );
          if (writing.length >= concurrency) await settleOldest();
        }
      }
    } finally {
      // Even when a write failed or the send stopped, the batches already committed get their events and
      // delivery; writes still running are awaited so none is left behind the caller's back.
      while (writing.length > 0) {
        try {
          await settleOldest();
        } catch (err) {
          // A progress callback that throws (the send stopping) must not strand the writes behind it.
          writeError ??= { err };
        }
      }
      await tail;
    }
    if (writeError) throw writeError.err;
    if (tailError) throw tailError.err;
    return { createdCount, existingCount, missingUserIds: missing };
  };

  return { validate, createBatch, createInBatches };
}
