// Owns asynchronous broadcasts (CONTRACT §5, "Large sends"): a send with `Prefer: respond-async`, or to more
// users than BROADCAST_ASYNC_THRESHOLD, is stored as a `broadcast_send` row and answered 202 at once; a worker
// on every instance claims queued rows (FOR UPDATE SKIP LOCKED), runs them with the per-user source key that
// makes a resumed run notify each user once, writes the counts after every committed batch, and beats a
// heartbeat. A row whose owner went silent (crash) is taken over after the same silence that declares an
// instance dead; a row cut short by a shutdown is released at once for another instance (docs/api.md).
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { AppError } from '../http/errors.js';
import { requestHash } from '../http/idempotency.js';
import { type Db, jsonb, rowsOf } from '../infra/db.js';
import { deleteOlderThan, type HousekeepingTask } from '../infra/housekeeping.js';
import type { Logger } from '../infra/logger.js';
import type { NotificationService } from '../notifications/service.js';
import { type BroadcastBody, type BroadcastResult, broadcast } from './broadcast.js';

export type SendStatus = 'queued' | 'running' | 'done' | 'failed';

export interface SendView extends BroadcastResult {
  sendId: string;
  status: SendStatus;
  createdAt: string;
  finishedAt: string | null;
}

interface SendRow {
  id: string;
  scope: string;
  request_hash: string;
  status: SendStatus;
  target_count: number;
  created_count: number;
  skipped_count: number;
  failures: BroadcastResult['failures'];
  created_at: Date | string;
  finished_at: Date | string | null;
}

const iso = (v: Date | string | null) => (v === null ? null : new Date(v).toISOString());

const view = (r: SendRow): SendView => ({
  sendId: r.id,
  status: r.status,
  targetCount: Number(r.target_count),
  createdCount: Number(r.created_count),
  skippedCount: Number(r.skipped_count),
  failures: r.failures,
  createdAt: iso(r.created_at) as string,
  finishedAt: iso(r.finished_at),
});

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The notifications' per-user source key of one asynchronous send. */
export const sendSourceKey = (sendId: string) => `admin.send:${sendId}`;

/** Failed attempts (a run that threw) after which a send is marked failed instead of retried. */
const MAX_ATTEMPTS = 5;

export interface SendQueueOptions {
  db: Db;
  logger: Logger;
  service: NotificationService;
  batchSize: number;
  instanceId: string;
  pollMs: number;
  heartbeatMs: number;
  /** Silence after which a running send's owner is presumed dead. */
  staleMs: number;
  /** Users holding a live stream anywhere (they are reached first). */
  onlineUsers?: () => Promise<string[]>;
}

export function createSendQueue(options: SendQueueOptions) {
  const { db, logger } = options;
  const running = new Map<string, { stopped: boolean; done: Promise<void> }>();
  let timer: NodeJS.Timeout | undefined;
  let stopping = false;
  let polling: Promise<void> | undefined;

  const exec = async <T>(query: ReturnType<typeof sql>) => rowsOf<T>(await db.execute(query));

  /** Claims one runnable send: queued, or running under an owner that stopped beating. */
  const claimOne = async (): Promise<{ id: string; body: BroadcastBody } | null> => {
    const [row] = await exec<{ id: string; body: BroadcastBody }>(sql`
      update broadcast_send s set status = 'running', owner_instance = ${options.instanceId},
        heartbeat_at = now(), attempts = s.attempts + 1
      where s.id = (
        select id from broadcast_send
        where status = 'queued'
           or (status = 'running' and heartbeat_at < now() - ${options.staleMs} * interval '1 millisecond')
        order by created_at
        limit 1
        for update skip locked)
      returning s.id::text as id, s.body`);
    return row ?? null;
  };

  const mine = (id: string) =>
    sql`id = ${id}::uuid and owner_instance = ${options.instanceId} and status = 'running'`;

  const run = async (id: string, body: BroadcastBody, isStopped: () => boolean): Promise<void> => {
    const beat = setInterval(() => {
      db.execute(sql`update broadcast_send set heartbeat_at = now() where ${mine(id)}`).catch(() => {
        // A missed beat only brings a takeover closer; the per-user source key keeps a double run exact.
      });
    }, options.heartbeatMs);
    beat.unref();
    // Progress writes are serialised and coalesced: at most one in flight, the latest counts win.
    let pending: BroadcastResult | null = null;
    let writing: Promise<void> | null = null;
    const flush = (): Promise<void> => {
      if (writing || !pending) return writing ?? Promise.resolve();
      const p = pending;
      pending = null;
      writing = db
        .execute(sql`update broadcast_send set target_count = ${p.targetCount}, created_count = ${p.createdCount},
            skipped_count = ${p.skippedCount}, failures = ${jsonb(p.failures)}, heartbeat_at = now()
            where ${mine(id)}`)
        .then(
          () => undefined,
          (err: unknown) => logger.warn({ err, sendId: id }, 'broadcast progress not recorded'),
        )
        .finally(() => {
          writing = null;
          void flush();
        });
      return writing;
    };
    try {
      const result = await broadcast(
        {
          db,
          service: options.service,
          batchSize: options.batchSize,
          ...(options.onlineUsers ? { onlineUsers: options.onlineUsers } : {}),
        },
        body,
        sendSourceKey(id),
        {
          onProgress: (partial) => {
            // Thrown between batches: the committed ones keep their delivery, the rest is left to the next owner.
            if (isStopped()) throw new SendStopped();
            pending = partial;
            void flush();
          },
        },
      );
      await flush();
      await db.execute(sql`update broadcast_send set status = 'done', target_count = ${result.targetCount},
          created_count = ${result.createdCount}, skipped_count = ${result.skippedCount},
          failures = ${jsonb(result.failures)}, finished_at = now(), error = null
          where ${mine(id)}`);
      logger.info({ sendId: id, ...result, failures: result.failures.length }, 'asynchronous broadcast done');
    } catch (err) {
      await flush();
      if (err instanceof SendStopped) {
        // Cut short by a shutdown: hand it back at once, so another instance resumes it without waiting for the
        // heartbeat to go stale (users already reached are not notified again).
        await db
          .execute(sql`update broadcast_send set status = 'queued', owner_instance = null,
              attempts = greatest(attempts - 1, 0) where ${mine(id)}`)
          .catch((e: unknown) => logger.warn({ err: e, sendId: id }, 'broadcast not released'));
        logger.info({ sendId: id }, 'asynchronous broadcast released for another instance');
      } else {
        logger.error({ err, sendId: id }, 'asynchronous broadcast failed');
        await db
          .execute(sql`update broadcast_send
              set status = case when attempts >= ${MAX_ATTEMPTS} then 'failed' else 'queued' end,
                error = ${(err as Error).message.slice(0, 500)},
                finished_at = case when attempts >= ${MAX_ATTEMPTS} then now() end, owner_instance = null
              where ${mine(id)}`)
          .catch((e: unknown) => logger.warn({ err: e, sendId: id }, 'broadcast failure not recorded'));
      }
    } finally {
      clearInterval(beat);
    }
  };

  const poll = async () => {
    if (stopping) return;
    try {
      // One send at a time per instance: a send already fans out in pipelined batches.
      if (running.size > 0) return;
      const claimed = await claimOne();
      if (!claimed || stopping) return;
      const state = { stopped: false, done: Promise.resolve() };
      state.done = run(claimed.id, claimed.body, () => state.stopped).finally(() => {
        running.delete(claimed.id);
        kick();
      });
      running.set(claimed.id, state);
    } catch (err) {
      logger.warn({ err }, 'broadcast queue poll failed');
    }
  };

  const kick = () => {
    if (stopping || polling) return;
    polling = poll().finally(() => {
      polling = undefined;
    });
  };

  return {
    start() {
      timer = setInterval(kick, options.pollMs);
      timer.unref();
      kick();
    },
    /** Runs queued sends now (after an enqueue on this instance). */
    kick,
    /** Stops claiming; running sends stop after their current batch and are released for another instance. */
    async stop() {
      stopping = true;
      if (timer) clearInterval(timer);
      await polling;
      for (const state of running.values()) state.stopped = true;
      await Promise.allSettled([...running.values()].map((s) => s.done));
    },

    /**
     * Stores a send (202 path). With an Idempotency-Key the same key returns the same send; the same key with
     * another body is a 409, as for synchronous sends.
     */
    async enqueue(input: { scope: string; idempotencyKey?: string; body: BroadcastBody }): Promise<SendView> {
      const hash = requestHash(input.body);
      const id = randomUUID();
      const key = input.idempotencyKey ?? null;
      const inserted = await exec<SendRow>(sql`
        insert into broadcast_send (id, scope, idempotency_key, request_hash, body)
        values (${id}::uuid, ${input.scope}, ${key}, ${hash}, ${jsonb(input.body)})
        on conflict (scope, idempotency_key) where idempotency_key is not null do nothing
        returning id::text as id, scope, request_hash, status, target_count, created_count, skipped_count, failures,
          created_at, finished_at`);
      let row = inserted[0];
      if (!row) {
        [row] = await exec<SendRow>(sql`
          select id::text as id, scope, request_hash, status, target_count, created_count, skipped_count, failures,
            created_at, finished_at
          from broadcast_send where scope = ${input.scope} and idempotency_key = ${key}`);
        if (!row) throw new AppError(409, 'IDEMPOTENCY_CONFLICT', 'Idempotency key state changed; retry');
        if (row.request_hash !== hash) {
          throw new AppError(
            409,
            'IDEMPOTENCY_KEY_REUSED',
            'This Idempotency-Key was already used with a different request body',
          );
        }
      } else {
        kick();
      }
      return view(row);
    },

    /** null when there is no such send (or it belongs to another API key). */
    async get(id: string, scope: { apiKeyScope?: string }): Promise<SendView | null> {
      if (!UUID_PATTERN.test(id)) return null;
      const [row] = await exec<SendRow>(sql`
        select id::text as id, scope, request_hash, status, target_count, created_count, skipped_count, failures,
          created_at, finished_at
        from broadcast_send where id = ${id}::uuid`);
      if (!row) return null;
      // An admin sees every send; a key sees the sends it made.
      if (scope.apiKeyScope !== undefined && row.scope !== scope.apiKeyScope) return null;
      return view(row);
    },
  };
}

/** Thrown from the progress callback to stop a run between batches. */
class SendStopped extends Error {
  constructor() {
    super('shutting down');
  }
}

export type SendQueue = ReturnType<typeof createSendQueue>;

/**
 * Finished asynchronous sends (their progress resources) are kept 7 days, then deleted; queued and running ones
 * always stay. Their Idempotency-Key answers retries for as long as the row exists.
 */
export const broadcastSendRetentionTask = (): HousekeepingTask =>
  deleteOlderThan({
    owner: 'admin',
    countName: 'broadcastSendsDeleted',
    statement: sql`delete from broadcast_send where status in ('done', 'failed')
                   and coalesce(finished_at, created_at) < now() - make_interval(days => 7) returning 1`,
  });
