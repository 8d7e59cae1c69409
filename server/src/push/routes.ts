// Owns the Web Push HTTP routes (docs/api.md#web-push): the public key (no session), the caller's subscriptions
// (session), and the admin's view of a notification's push attempts.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { authOf, requireAdmin, requireUser, type SessionResolver } from '../auth/guard.js';
import { AppError, notFound as notFoundError } from '../http/errors.js';
import { ErrorSchema } from '../http/schemas.js';
import { PushErrorCode } from './errors.js';
import { PushDeliverySchema, SubscribeBodySchema, SubscriptionSchema } from './schemas.js';
import type { PushService } from './service.js';

// Under /notification/: documented with the notification routes.
const tags = ['notifications'];
const security = [{ session: [] }];

export function registerPushRoutes(
  app: FastifyInstance,
  service: PushService,
  publicKey: string | null,
  sessions: SessionResolver,
): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const authenticate = requireUser(sessions);
  const notConfigured = () =>
    new AppError(404, PushErrorCode.NOT_CONFIGURED, 'Web Push is not configured on this server');
  const notFound = () => notFoundError('Push subscription not found');

  r.get(
    '/notification/push/public-key',
    {
      schema: {
        tags,
        summary: 'The VAPID application server key (no session)',
        description:
          'Pass it as `applicationServerKey` to `pushManager.subscribe()`. 404 `PUSH_NOT_CONFIGURED` when push is off.',
        response: {
          200: z
            .object({ publicKey: z.string().describe('base64url, 65-byte uncompressed P-256 public key') })
            .meta({
              example: {
                publicKey:
                  'BAtIzr3L4gXWolp6UlxijWXc1zKmAA90MQ_sxtFvBriJPTQ5l-3C2-G7x8jndYNu67mPw_AvUG7pDV5LdvvoYZA',
              },
            }),
          404: ErrorSchema,
        },
      },
    },
    async () => {
      if (!publicKey) throw notConfigured();
      return { publicKey };
    },
  );

  r.post(
    '/notification/push/subscriptions',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: 'Subscribe this browser (idempotent per endpoint)',
        description:
          'Body: the browser’s `PushSubscription.toJSON()`. A new endpoint → 201; an endpoint already stored → 200 ' +
          'with the same id, now owned by the caller (another user signed in on that browser). The endpoint must be ' +
          'https and resolve to public addresses (unless PUSH_ALLOW_PRIVATE_ENDPOINTS=true); `p256dh` must be a ' +
          '65-byte P-256 point and `auth` 16 bytes, base64url. A user keeps at most PUSH_MAX_SUBSCRIPTIONS_PER_USER ' +
          'browsers: the least recently subscribed beyond it are removed.',
        body: SubscribeBodySchema,
        response: {
          200: z.object({ subscription: SubscriptionSchema }).describe('Already stored (same id)'),
          201: z.object({ subscription: SubscriptionSchema }).describe('Stored'),
          400: ErrorSchema,
          401: ErrorSchema,
          404: ErrorSchema,
        },
      },
    },
    async (request, reply) => {
      if (!publicKey) throw notConfigured();
      const { subscription, created } = await service.subscribe(
        authOf(request).user.id,
        request.body,
        request.headers['user-agent'],
      );
      return reply.code(created ? 201 : 200).send({ subscription });
    },
  );

  r.get(
    '/notification/push/subscriptions',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: 'List own subscribed browsers',
        response: { 200: z.object({ subscriptions: z.array(SubscriptionSchema) }), 401: ErrorSchema },
      },
    },
    async (request) => ({ subscriptions: await service.list(authOf(request).user.id) }),
  );

  r.delete(
    '/notification/push/subscriptions/:id',
    {
      onRequest: authenticate,
      schema: {
        tags,
        security,
        summary: 'Remove a subscribed browser',
        description: 'Its queued messages are cancelled. 404 when missing or another user’s.',
        params: z.object({ id: z.string().max(100) }),
        response: { 200: z.object({ id: z.string() }), 400: ErrorSchema, 401: ErrorSchema, 404: ErrorSchema },
      },
    },
    async (request) => {
      const id = request.params.id.toLowerCase();
      if (!(await service.remove(authOf(request).user.id, id))) throw notFound();
      return { id };
    },
  );

  r.get(
    '/admin/push/deliveries',
    {
      onRequest: requireAdmin(sessions),
      schema: {
        tags: ['admin'],
        security,
        summary: 'Push attempts of one notification (admin)',
        description:
          'One row per browser the notification was queued for, with its latest attempt. Kept 7 days after it ' +
          'finished. An unknown id gives an empty list.',
        querystring: z.strictObject({
          notificationId: z.string().min(1).max(100),
          limit: z.coerce.number().int().min(1).max(500).default(100),
        }),
        response: {
          200: z.object({ deliveries: z.array(PushDeliverySchema) }),
          400: ErrorSchema,
          401: ErrorSchema,
          403: ErrorSchema,
        },
      },
    },
    async (request) => ({
      deliveries: await service.deliveries(request.query.notificationId, request.query.limit),
    }),
  );
}
