// Registers the admin feature's routes: POST /admin/notifications/send (docs/api.md#admin-broadcast-adminnotificationssend-admin-session),
// for an admin session or an API key with the `notifications:send` scope (`Authorization: Bearer hk_…`).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { authenticateApiKey } from '../api-keys/index.js';
import { authOf, requireAdmin } from '../auth/guard.js';
import { withIdempotency } from '../http/idempotency.js';
import { ErrorSchema } from '../http/schemas.js';
import { BroadcastBodySchema, BroadcastResultSchema, broadcast, broadcastSourceKey } from './broadcast.js';

export function registerAdmin(app: FastifyInstance): void {
  const { database, config, sessions, drain } = app.ctx;
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
  app.withTypeProvider<ZodTypeProvider>().post(
    '/admin/notifications/send',
    {
      // An Authorization header means an API key (sessions come as cookies): checked for its scope, never
      // falling back to the cookie. Otherwise an admin session.
      onRequest: async (request, reply) => {
        if (request.headers.authorization !== undefined) {
          return authenticateApiKey(app, request, 'notifications:send');
        }
        return adminSession(request, reply);
      },
      // Up to 10,000 identifiers do not fit the global 64 KiB limit; only admins and keys (checked first) get this.
      bodyLimit: 4 * 1024 * 1024,
      schema: {
        tags: ['admin'],
        security: [{ session: [] }, { apiKey: [] }],
        summary: 'Send a notification to one user, several users, or everyone',
        description:
          'Admin session, or `Authorization: Bearer <API key>` with the `notifications:send` scope (unknown, revoked or expired key → 401, missing scope → 403, over the per-key limit → 429). ' +
          'Identifiers are user ids or emails (case-insensitive). Banned users are skipped and counted; identifiers matching nobody are listed in `failures` with reason NOT_FOUND. Processed in batches of BROADCAST_BATCH_SIZE. With an `Idempotency-Key` header, a retry with the same body returns the first result without sending again (409 IDEMPOTENCY_IN_PROGRESS while the first is still running; a send interrupted by a crash is resumed by the retry, each user notified once); the same key with a different body is a 409.',
        headers: z.object({ 'idempotency-key': z.string().min(1).max(200).optional() }),
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
          400: ErrorSchema,
          401: ErrorSchema,
          403: ErrorSchema,
          409: ErrorSchema,
          429: ErrorSchema,
        },
      },
    },
    async (request) => {
      const deps = { db: database.db, service: app.notifications, batchSize: config.BROADCAST_BATCH_SIZE };
      const key = request.headers['idempotency-key'];
      // Without a key a send cut short by shutdown stops too (answered 503); only a keyed one can be resumed.
      if (!key) return broadcast(deps, request.body, undefined, drain.signal);
      return withIdempotency(
        database.db,
        {
          // A key's idempotency keys are its own, as a session's are its user's.
          scope: `admin.notifications.send:${request.apiKey ? `api-key:${request.apiKey.id}` : authOf(request).user.id}`,
          key,
          body: request.body,
        },
        claim,
        ({ claimKey, signal }) => broadcast(deps, request.body, broadcastSourceKey(claimKey), signal),
      );
    },
  );
}
