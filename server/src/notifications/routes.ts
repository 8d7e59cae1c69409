// Owns the /notification/* HTTP routes (docs/api.md#notifications-notification-session-cookie, #server-sent-events-notificationstream).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { authOf, requireUser, type SessionResolver } from '../auth/guard.js';
import { notModified } from '../http/cache.js';
import { AppError, HttpErrorCode } from '../http/errors.js';
import { ErrorSchema } from '../http/schemas.js';
import type { ShutdownHooks } from '../infra/shutdown.js';
import type { Realtime } from '../realtime/index.js';
import {
  CountsSchema,
  ListQuerySchema,
  type ListResponse,
  ListResponseSchema,
  NotificationSchema,
  PreferencesPatchSchema,
  PreferencesSchema,
} from './schemas.js';
import type { NotificationService } from './service.js';
import { parseLastEventId } from './stream-hub/resume.js';
import type { StreamHub } from './stream-hub.js';

const NotModified = z.null().describe('Not modified: the ETag given in If-None-Match is current');
const errors = { 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema };
const tags = ['notifications'];
const security = [{ session: [] }];
// Any malformed id is simply not found (404), like another user's; the service checks the uuid shape.
const IdParams = z.object({ id: z.string() });

export interface NotificationRoutesDeps {
  service: NotificationService;
  hub: StreamHub;
  sessions: SessionResolver;
  lifecycle: ShutdownHooks;
  realtime: Realtime;
}

export function registerNotificationRoutes(app: FastifyInstance, deps: NotificationRoutesDeps) {
  const { service, hub, lifecycle, realtime } = deps;
  const r = app.withTypeProvider<ZodTypeProvider>();
  const authenticate = requireUser(deps.sessions);

  r.get(
    '/notification/list',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: 'List own notifications, newest first',
        description:
          'Paged list; `filter` by read state, `type`, and `search` (case-insensitive substring of title or content; `%`, `_`, `\\` match literally).',
        querystring: ListQuerySchema,
        response: { 200: ListResponseSchema, ...errors },
      },
    },
    async (request, reply) => {
      // Already serialised by the service (the same encoding as the response schema's): a cached first page is
      // sent as stored, without parsing and serialising it again. Fastify sends a string with a JSON content type
      // as it is (no serializer runs); the type provider cannot express that, hence the cast.
      const json = await service.listJson(authOf(request).user.id, request.query);
      return reply.type('application/json; charset=utf-8').send(json as unknown as ListResponse);
    },
  );

  r.get(
    '/notification/counts',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: 'Counts by read state and by every type',
        description:
          'Served from the shared read cache until the next change to the caller’s notifications (exact after any change returns). Answers `If-None-Match` with 304 when the counts did not change (cheap polling).',
        response: {
          200: z.object({ counts: CountsSchema }).describe('Counts by read state and by type'),
          304: NotModified,
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const body = { counts: await service.counts(authOf(request).user.id) };
      return notModified(request, reply, body) ? reply.code(304).send(null) : body;
    },
  );

  r.get(
    '/notification/unread-count',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: 'Unread count (served from the shared cache)',
        description: 'Answers `If-None-Match` with 304 when the count did not change (cheap polling).',
        response: {
          200: z
            .object({ unreadCount: z.number().int().meta({ example: 3 }) })
            .describe('The caller’s unread count'),
          304: NotModified,
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const body = { unreadCount: await service.unreadCount(authOf(request).user.id) };
      return notModified(request, reply, body) ? reply.code(304).send(null) : body;
    },
  );

  r.patch(
    '/notification/mark-all-read',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: 'Mark every own notification read',
        response: {
          200: z
            .object({ updatedCount: z.number().int() })
            .describe('How many notifications were marked read'),
          ...errors,
        },
      },
    },
    async (request) => ({ updatedCount: await service.markAllRead(authOf(request).user.id) }),
  );

  r.patch(
    '/notification/:id/read',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: 'Mark one notification read or unread',
        params: IdParams,
        body: z.strictObject({ read: z.boolean() }).meta({ example: { read: true } }),
        response: {
          200: z.object({ notification: NotificationSchema }).describe('The updated notification'),
          ...errors,
        },
      },
    },
    async (request) => ({
      notification: await service.setRead(authOf(request).user.id, request.params.id, request.body.read),
    }),
  );

  r.delete(
    '/notification/delete-all',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: 'Delete every own notification',
        response: {
          200: z.object({ deletedCount: z.number().int() }).describe('How many notifications were deleted'),
          ...errors,
        },
      },
    },
    async (request) => ({ deletedCount: await service.removeAll(authOf(request).user.id) }),
  );

  r.delete(
    '/notification/:id',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: 'Delete one notification',
        params: IdParams,
        response: {
          200: z.object({ notificationId: z.string() }).describe('The id of the deleted notification'),
          ...errors,
        },
      },
    },
    async (request) => ({ notificationId: await service.remove(authOf(request).user.id, request.params.id) }),
  );

  r.get(
    '/notification/preferences',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: 'Own delivery preferences (created with defaults on first read)',
        response: {
          200: z.object({ preferences: PreferencesSchema }).describe('The caller’s delivery preferences'),
          ...errors,
        },
      },
    },
    async (request) => ({ preferences: await service.getPreferences(authOf(request).user.id) }),
  );

  r.patch(
    '/notification/preferences',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: 'Update delivery preferences',
        description:
          'Provided fields replace stored ones; arrays are deduplicated; `emailTypes: null` restores the default set.',
        body: PreferencesPatchSchema.meta({
          example: { emailEnabled: true, emailTypes: ['mention', 'warning'] },
        }),
        response: {
          200: z
            .object({ preferences: PreferencesSchema })
            .describe('The preferences as stored after the update'),
          ...errors,
        },
      },
    },
    async (request) => ({
      preferences: await service.updatePreferences(authOf(request).user.id, request.body),
    }),
  );

  r.post(
    '/notification/heartbeat',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: "Refresh the caller's presence cluster-wide",
        response: {
          200: z
            .object({ timestamp: z.number().int().meta({ example: 1735732800000 }) })
            .describe('Presence refreshed; the server time in epoch ms'),
          ...errors,
        },
      },
    },
    async (request) => {
      await realtime.presence.touch(authOf(request).user.id);
      return { timestamp: Date.now() };
    },
  );

  r.get(
    '/notification/stream',
    {
      onRequest: async (request, reply) => {
        // Refuse before authenticating: a draining instance should send clients elsewhere quickly.
        if (lifecycle.isShuttingDown()) {
          throw new AppError(
            503,
            HttpErrorCode.UNAVAILABLE,
            'The server is shutting down; reconnect shortly',
          );
        }
        await authenticate(request, reply);
      },
      schema: {
        tags,
        security,
        summary: 'Live notification events (Server-Sent Events)',
        description:
          'text/event-stream. Each event has `id` (resume cursor), `event` and JSON `data` with a `type` equal to the event name: connected, new_notification, notification_updated, notification_deleted, notifications_cleared, unread_count_changed, keep_alive, error. Reconnect with `Last-Event-ID` to receive every missed state-changing event (new_notification, notification_updated, notification_deleted, notifications_cleared, unread_count_changed) in order; `connected` carries `resumed`, `replayed` and `resync` (true: refetch the list and counts).',
        headers: z.object({ 'last-event-id': z.string().optional() }),
        response: {
          // Declared per media type: the stream is not JSON (only its errors, sent before it opens, are).
          200: {
            description:
              'The event stream (first event `connected`), open until the client or server ends it',
            content: { 'text/event-stream': { schema: z.string() } },
          },
          401: ErrorSchema,
          429: ErrorSchema,
          503: ErrorSchema,
        },
      },
    },
    async (request, reply) => {
      // HEAD (which Fastify routes here) learns the headers without opening, registering or replaying.
      if (request.method === 'HEAD') {
        return reply
          .code(200)
          .header('content-type', 'text/event-stream')
          .header('cache-control', 'no-cache')
          .send('');
      }
      const auth = authOf(request);
      const refusal = hub.admit(auth.user.id, request.ip);
      if (refusal) {
        throw new AppError(429, refusal.code, refusal.message, undefined, {
          'retry-after': String(refusal.retryAfterS),
        });
      }
      const raw = request.headers['last-event-id'];
      // Fastify keeps the request alive until the stream ends (its onResponse runs then); the hub keeps the
      // few fields it needs, so the user and session objects need not live for hours with it.
      request.auth = null;
      await hub.open(reply, auth, parseLastEventId(typeof raw === 'string' ? raw : undefined), request.ip);
    },
  );
}
