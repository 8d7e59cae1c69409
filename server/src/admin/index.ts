// Registers the admin feature's routes: POST /admin/notifications/send (docs/api.md#admin-broadcast-adminnotificationssend-admin-session)
// and GET /admin/notifications/sends/:id (asynchronous sends, admin/sends.ts), for an admin session or an API key
// with the `notifications:send` scope (`Authorization: Bearer hk_…`).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { type ApiKeyService, authenticateApiKey, confirmApiKey } from '../api-keys/index.js';
import { countAccounts } from '../auth/accounts.js';
import { authOf, requireAdmin, type SessionResolver } from '../auth/guard.js';
import type { Config } from '../config.js';
import type { CutShort } from '../http/drain.js';
import { notFound } from '../http/errors.js';
import { withIdempotency } from '../http/idempotency.js';
import { ErrorSchema } from '../http/schemas.js';
import type { Database } from '../infra/db.js';
import type { Housekeeping } from '../infra/housekeeping.js';
import type { Logger } from '../infra/logger.js';
import type { ShutdownHooks } from '../infra/shutdown.js';
import type { NotificationService } from '../notifications/index.js';
import type { Presence } from '../realtime/index.js';
import {
  type BroadcastBody,
  BroadcastBodySchema,
  BroadcastResultSchema,
  broadcast,
  broadcastSourceKey,
} from './broadcast.js';
import { broadcastSendRetentionTask, createSendQueue } from './sends.js';

const SendStatusSchema = z.enum(['queued', 'running', 'done', 'failed']);

export const SendSchema = BroadcastResultSchema.extend({
  sendId: z.string(),
  status: SendStatusSchema,
  createdAt: z.string(),
  finishedAt: z.string().nullable(),
}).meta({
  example: {
    sendId: '0b9f3c1e-2a4d-4c6b-8e7f-9a0b1c2d3e4f',
    status: 'running',
    targetCount: 250000,
    createdCount: 120500,
    skippedCount: 12,
    failures: [],
    createdAt: '2026-01-01T12:00:00.000Z',
    finishedAt: null,
  },
});

/** RFC 7240: `Prefer: respond-async` (among other preferences, any case). */
function prefersAsync(header: string | string[] | undefined): boolean {
  const values = Array.isArray(header) ? header : header === undefined ? [] : [header];
  return values.some((v) =>
    v.split(',').some((pref) => pref.split(';')[0]?.trim().toLowerCase() === 'respond-async'),
  );
}

/** How many users a send addresses, as far as the threshold needs to know (`all` counts every account). */
async function audienceExceeds(
  db: Parameters<typeof countAccounts>[0],
  body: BroadcastBody,
  threshold: number,
) {
  const { target } = body;
  if (target.scope === 'user') return 1 > threshold;
  if (target.scope === 'users') return new Set(target.identifiers).size > threshold;
  return (await countAccounts(db)) > threshold;
}

export interface AdminDeps {
  config: Config;
  logger: Logger;
  database: Database;
  sessions: SessionResolver;
  lifecycle: ShutdownHooks;
  /** The shutdown drain as request work sees it (a send cut short releases its idempotency claim). */
  drain: CutShort;
  notifications: NotificationService;
  apiKeys: ApiKeyService;
  /** Who holds a live stream: an audience of everyone reaches them first. */
  presence: Pick<Presence, 'onlineUsers'>;
  /** The shared housekeeping scheduler: the feature registers its tables' retention task. */
  housekeeping: Pick<Housekeeping, 'register'>;
}

export function registerAdmin(app: FastifyInstance, deps: AdminDeps): void {
  const { database, config, sessions, drain, notifications, presence } = deps;
  const adminSession = requireAdmin(sessions);
  // A claim lives as long as its instance: refreshed at the registry's heartbeat pace and presumed abandoned
  // after the same silence that declares an instance dead (docs/api.md#operations), not after a flat timer. At least three
  // beats, so a misconfigured DEAD_INSTANCE_MS cannot hand a live owner's claim to a retry.
  const claim = {
    instanceId: config.INSTANCE_ID,
    heartbeatMs: config.HEARTBEAT_INTERVAL_MS,
    staleMs: Math.max(config.DEAD_INSTANCE_MS, 3 * config.HEARTBEAT_INTERVAL_MS),
    // A send still running when shutdown's grace ends releases its claim at once (docs/architecture.md,
    // "Shutdown drain"), so the client's retry on another instance resumes it without waiting staleMs.
    cutShort: drain,
  };
  const sends = createSendQueue({
    db: database.db,
    logger: deps.logger.child({ feature: 'admin', component: 'broadcast-queue' }),
    service: notifications,
    batchSize: config.BROADCAST_BATCH_SIZE,
    instanceId: config.INSTANCE_ID,
    pollMs: config.BROADCAST_QUEUE_POLL_MS,
    heartbeatMs: claim.heartbeatMs,
    staleMs: claim.staleMs,
    onlineUsers: () => deps.presence.onlineUsers(),
  });
  app.addHook('onReady', async () => sends.start());
  deps.housekeeping.register(broadcastSendRetentionTask());
  // Stopped with the other queue workers while the pools are still open: a send under way stops after its
  // current batch and is handed back for another instance.
  deps.lifecycle.onShutdown('close-connections', 'broadcast-queue', () => sends.stop());

  // An Authorization header means an API key (sessions come as cookies): checked for its scope, never falling
  // back to the cookie. Otherwise an admin session.
  const senderOnly = async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.headers.authorization !== undefined) {
      return authenticateApiKey(deps.apiKeys, request, 'notifications:send');
    }
    return adminSession(request, reply);
  };
  const scopeOf = (request: FastifyRequest) =>
    request.apiKey ? `api-key:${request.apiKey.id}` : `user:${authOf(request).user.id}`;

  app.withTypeProvider<ZodTypeProvider>().post(
    '/admin/notifications/send',
    {
      onRequest: senderOnly,
      preHandler: (request) => confirmApiKey(deps.apiKeys, request),
      // Up to 10,000 identifiers do not fit the global 64 KiB limit; only admins and keys (checked first) get this.
      bodyLimit: 4 * 1024 * 1024,
      schema: {
        tags: ['admin'],
        security: [{ session: [] }, { apiKey: [] }],
        summary: 'Send a notification to one user, several users, or everyone',
        description:
          'Admin session, or `Authorization: Bearer <API key>` with the `notifications:send` scope (unknown, revoked or expired key → 401, missing scope → 403, over the per-key limit → 429). ' +
          'Identifiers are user ids or emails (case-insensitive). Banned users are skipped and counted; identifiers matching nobody are listed in `failures` with reason NOT_FOUND. Processed in batches of BROADCAST_BATCH_SIZE. With an `Idempotency-Key` header, a retry with the same body returns the first result without sending again (409 IDEMPOTENCY_IN_PROGRESS while the first is still running; a send interrupted by a crash is resumed by the retry, each user notified once); the same key with a different body is a 409.',
        headers: z.object({
          'idempotency-key': z.string().min(1).max(200).optional(),
          prefer: z.string().max(500).optional(),
        }),
        body: BroadcastBodySchema.meta({
          example: {
            target: { scope: 'users', identifiers: ['ada@example.com', 'Yx3kq0H2bq7sTQ1mB9dZ4Lw8'] },
            notification: {
              type: 'announcement',
              title: 'Maintenance tonight',
              content: 'The service restarts at 22:00 UTC.',
              metadata: {
                priority: 'high',
                actions: [{ actionId: 'info', type: 'link', label: 'Details', url: '/status' }],
              },
              deliveryOptions: { strategies: ['sse', 'email'] },
            },
          },
        }),
        response: {
          200: BroadcastResultSchema.describe(
            'What was sent: counts of recipients, skipped users and failures',
          ),
          202: z
            .object({ sendId: z.string(), status: SendStatusSchema })
            .describe(
              'Accepted to run in the background (`Prefer: respond-async`, or more than BROADCAST_ASYNC_THRESHOLD users); progress at the `Location` header, GET /admin/notifications/sends/:id',
            ),
          400: ErrorSchema,
          401: ErrorSchema,
          403: ErrorSchema,
          409: ErrorSchema,
          429: ErrorSchema,
        },
      },
    },
    async (request, reply) => {
      const deps = {
        db: database.db,
        service: notifications,
        batchSize: config.BROADCAST_BATCH_SIZE,
        onlineUsers: () => presence.onlineUsers(),
      };
      const key = request.headers['idempotency-key'];
      const asked = prefersAsync(request.headers.prefer);
      if (asked || (await audienceExceeds(database.db, request.body, config.BROADCAST_ASYNC_THRESHOLD))) {
        // Validated now, so a refused body is a 400 here rather than a failed send later.
        const { deliveryOptions: _strategies, ...content } = request.body.notification;
        notifications.validate(content);
        const send = await sends.enqueue({
          scope: scopeOf(request),
          ...(key ? { idempotencyKey: key } : {}),
          body: request.body,
        });
        reply.header('location', `/admin/notifications/sends/${send.sendId}`);
        if (asked) reply.header('preference-applied', 'respond-async');
        return reply.code(202).send({ sendId: send.sendId, status: send.status });
      }
      // Without a key a send cut short by shutdown stops too (answered 503); only a keyed one can be resumed.
      if (!key) return broadcast(deps, request.body, undefined, { signal: drain.signal });
      return withIdempotency(
        database.db,
        {
          // A key's idempotency keys are its own, as a session's are its user's.
          scope: `admin.notifications.send:${request.apiKey ? `api-key:${request.apiKey.id}` : authOf(request).user.id}`,
          key,
          body: request.body,
        },
        claim,
        ({ claimKey, signal }) => broadcast(deps, request.body, broadcastSourceKey(claimKey), { signal }),
      );
    },
  );

  app.withTypeProvider<ZodTypeProvider>().get(
    '/admin/notifications/sends/:id',
    {
      onRequest: senderOnly,
      schema: {
        tags: ['admin'],
        security: [{ session: [] }, { apiKey: [] }],
        summary: 'Progress of an asynchronous send',
        description:
          'Counts grow as batches commit and are final when `status` is `done`. An admin sees every send; an API ' +
          'key sees the sends it made (another’s → 404).',
        params: z.object({ id: z.string().max(100) }),
        response: {
          200: SendSchema.describe('The send and its progress'),
          401: ErrorSchema,
          403: ErrorSchema,
          404: ErrorSchema,
        },
      },
    },
    async (request, reply) => {
      const send = await sends.get(
        request.params.id,
        request.apiKey ? { apiKeyScope: `api-key:${request.apiKey.id}` } : {},
      );
      if (!send) throw notFound('No such send');
      reply.header('cache-control', 'no-store');
      return send;
    },
  );
}
