// Owns the administrator broadcast (docs/api.md#admin-broadcast-adminnotificationssend-admin-session): resolves targets (ids or case-insensitive emails, or every
// user by keyset walk), skips banned users, and hands eligible users to the notification service in batches
// (one statement, one bus message, one delivery pass per batch, pipelined).
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { type AccountRow, accountBatches, findAccounts } from '../auth/accounts.js';
import { HttpErrorCode } from '../http/errors.js';
import { noNul } from '../http/schemas.js';
import type { Db } from '../infra/db.js';
import {
  ContentSchema,
  MetadataSchema,
  NotificationTypeSchema,
  StrategyNameSchema,
  TitleSchema,
} from '../notifications/schemas.js';
import type { CreateOptions, NotificationService } from '../notifications/service.js';

const Identifier = z.string().trim().min(1).max(320).refine(noNul, 'must not contain NUL characters');

export const BroadcastBodySchema = z.strictObject({
  target: z.discriminatedUnion('scope', [
    z.strictObject({ scope: z.literal('user'), identifier: Identifier }),
    z.strictObject({ scope: z.literal('users'), identifiers: z.array(Identifier).min(1).max(10_000) }),
    z.strictObject({ scope: z.literal('all') }),
  ]),
  notification: z.strictObject({
    type: NotificationTypeSchema,
    title: TitleSchema,
    content: ContentSchema,
    metadata: MetadataSchema.optional(),
    deliveryOptions: z
      .strictObject({ strategies: z.array(StrategyNameSchema).min(1).max(3).optional() })
      .optional(),
  }),
});
export type BroadcastBody = z.infer<typeof BroadcastBodySchema>;

export const BroadcastResultSchema = z
  .object({
    targetCount: z.number().int(),
    createdCount: z.number().int(),
    skippedCount: z.number().int(),
    failures: z.array(z.object({ identifier: z.string(), reason: z.string() })),
  })
  .meta({
    example: {
      targetCount: 3,
      createdCount: 2,
      skippedCount: 1,
      failures: [{ identifier: 'nobody@example.com', reason: 'NOT_FOUND' }],
    },
  });
export type BroadcastResult = z.infer<typeof BroadcastResultSchema>;

/** The notifications' source key for an idempotent broadcast: stable for one idempotency scope and key. */
export function broadcastSourceKey(claimKey: string): string {
  return `admin.broadcast:${createHash('sha256').update(claimKey).digest('hex')}`;
}

/**
 * With `sourceKey` (an idempotent send) every user gets at most one notification for that key, so a send
 * resumed after a crash reaches only the users the crashed run missed, and its counts include the ones it had
 * reached: the result equals a crash-free run's.
 */
export async function broadcast(
  deps: {
    db: Db;
    service: NotificationService;
    batchSize: number;
    /** Users holding a live stream anywhere (presence): an audience of everyone reaches them first. */
    onlineUsers?: () => Promise<string[]>;
  },
  body: BroadcastBody,
  sourceKey?: string,
  extra: {
    /** Called with the counts so far after each committed batch (an asynchronous send's progress). */
    onProgress?: (partial: BroadcastResult) => void;
    /** Shutdown cut the request short: stop before the next batch (the idempotent retry resumes the rest). */
    signal?: AbortSignal;
  } = {},
): Promise<BroadcastResult> {
  const { db, service, batchSize } = deps;
  const { deliveryOptions, ...content } = body.notification;
  // Validated up front, so a refused body writes nothing even when no target matches.
  const input = service.validate(content);
  const failures: BroadcastResult['failures'] = [];
  let targetCount = 0;
  let createdCount = 0;
  let skippedCount = 0;
  // Progress counts what has committed so far; the final result is recounted from the service's totals.
  let progressCreated = 0;
  const { onProgress, signal } = extra;
  const options = {
    strategies: deliveryOptions?.strategies,
    sourceKey,
    signal,
    ...(onProgress
      ? {
          onBatch: (batch: { created: number; existing: number }) => {
            progressCreated += batch.created + batch.existing;
            onProgress({ targetCount, createdCount: progressCreated, skippedCount, failures: [...failures] });
          },
        }
      : {}),
  };

  const record = (
    r: { createdCount: number; existingCount: number; missingUserIds: string[] },
    idToIdentifier?: Map<string, string>,
  ) => {
    // `existing`: users an interrupted earlier run with the same source key already reached.
    createdCount += r.createdCount + r.existingCount;
    for (const id of r.missingUserIds) {
      // Deleted between resolution and insert.
      failures.push({ identifier: idToIdentifier?.get(id) ?? id, reason: HttpErrorCode.NOT_FOUND });
    }
  };

  if (body.target.scope === 'all') {
    // Online first (docs/design/notifications.md, "Online first"): the users holding a stream right now are
    // written and published before the walk, so reaching every open stream costs one pass over the connected
    // users, not over the whole audience. The walk then skips them and counts them as created.
    const reached = deps.onlineUsers
      ? await reachOnline(deps.onlineUsers, { db, service, batchSize }, input, {
          strategies: options.strategies,
          sourceKey,
          signal,
        })
      : new Set<string>();
    // No upper bound on the number of users: one page of the keyset walk at a time, and the service writes
    // page k + 1 while page k's events and delivery go out.
    async function* eligiblePages(): AsyncGenerator<string[]> {
      for await (const rows of accountBatches(db, batchSize)) {
        targetCount += rows.length;
        const eligible = rows.filter((r) => !r.banned).map((r) => r.id);
        skippedCount += rows.length - eligible.length;
        const fresh = reached.size > 0 ? eligible.filter((id) => !reached.has(id)) : eligible;
        createdCount += eligible.length - fresh.length;
        progressCreated += eligible.length - fresh.length;
        if (fresh.length > 0) yield fresh;
      }
    }
    record(await service.createForUserBatches(eligiblePages(), input, options));
    return { targetCount, createdCount, skippedCount, failures };
  }

  const identifiers =
    body.target.scope === 'user' ? [body.target.identifier] : [...new Set(body.target.identifiers)];
  const rows = await findAccounts(db, identifiers, identifiers);
  const byId = new Map(rows.map((r) => [r.id, r]));
  const byEmail = new Map(rows.map((r) => [r.email.toLowerCase(), r]));
  const matched = new Map<string, AccountRow>();
  const idToIdentifier = new Map<string, string>();
  for (const identifier of identifiers) {
    const row = byId.get(identifier) ?? byEmail.get(identifier.toLowerCase());
    if (!row) {
      failures.push({ identifier, reason: HttpErrorCode.NOT_FOUND });
      continue;
    }
    matched.set(row.id, row);
    if (!idToIdentifier.has(row.id)) idToIdentifier.set(row.id, identifier);
  }
  targetCount = matched.size;
  const eligible: string[] = [];
  for (const row of matched.values()) {
    if (row.banned) skippedCount++;
    else eligible.push(row.id);
  }
  if (eligible.length > 0) record(await service.createForUsers(eligible, input, options), idToIdentifier);
  return { targetCount, createdCount, skippedCount, failures };
}

/** Ids per account lookup of the online-first pass (one `= any(array)` statement each). */
const ONLINE_LOOKUP_CHUNK = 10_000;

/**
 * Writes and publishes the notification for the eligible (existing, not banned) users among those online now,
 * and returns who got it, so the walk that follows skips them. Presence is only an ordering hint: a failure to
 * list it, or a user it names who no longer exists, leaves the user to the walk. With a `sourceKey`, a resumed
 * send finds them `existing` and writes nothing twice.
 */
async function reachOnline(
  onlineUsers: () => Promise<string[]>,
  deps: { db: Db; service: NotificationService; batchSize: number },
  input: ReturnType<NotificationService['validate']>,
  options: Pick<CreateOptions, 'strategies' | 'sourceKey' | 'signal'>,
): Promise<Set<string>> {
  const online = await onlineUsers().catch(() => [] as string[]);
  const reached = new Set<string>();
  for (let i = 0; i < online.length; i += ONLINE_LOOKUP_CHUNK) {
    const rows = await findAccounts(deps.db, online.slice(i, i + ONLINE_LOOKUP_CHUNK), []);
    const eligible = rows.filter((r) => !r.banned).map((r) => r.id);
    if (eligible.length === 0) continue;
    const result = await deps.service.createForUsers(eligible, input, options);
    const missing = new Set(result.missingUserIds);
    for (const id of eligible) if (!missing.has(id)) reached.add(id);
  }
  return reached;
}
