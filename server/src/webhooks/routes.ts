// Registers the admin routes that manage webhooks: POST/GET /admin/webhooks, PATCH/DELETE /admin/webhooks/:id,
// POST /admin/webhooks/:id/rotate-secret and /test, GET /admin/webhooks/:id/deliveries and
// POST /admin/webhooks/:id/deliveries/:deliveryId/redeliver (admin session; docs/api.md#webhooks).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { authOf, requireAdmin, type SessionResolver } from '../auth/guard.js';
import { notFound as notFoundError, validationError } from '../http/errors.js';
import { ErrorSchema, noNul } from '../http/schemas.js';
import { WEBHOOK_EVENT_TYPES } from './events.js';
import { TEST_EVENT_TYPE, type WebhookService } from './service.js';
import { UrlRefused } from './ssrf.js';

const UrlField = z.string().trim().min(1).max(2048).refine(noNul, 'must not contain NUL characters');
const EventsField = z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1).max(WEBHOOK_EVENT_TYPES.length);
const DescriptionField = z.string().trim().max(500).refine(noNul, 'must not contain NUL characters');

export const CreateWebhookBodySchema = z.strictObject({
  url: UrlField,
  events: EventsField,
  description: DescriptionField.optional(),
});

export const UpdateWebhookBodySchema = z
  .strictObject({
    url: UrlField.optional(),
    events: EventsField.optional(),
    description: DescriptionField.nullable().optional(),
    enabled: z.boolean().optional(),
  })
  .refine((b) => Object.keys(b).length > 0, 'name at least one of url, events, description, enabled');

export const WebhookSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    events: z.array(z.enum(WEBHOOK_EVENT_TYPES)),
    description: z.string().nullable(),
    enabled: z.boolean().describe('false: offered no new events; queued deliveries wait until enabled'),
    createdAt: z.string(),
  })
  .meta({
    example: {
      id: '8d1f6c2a-5b7e-4f3a-9c0d-1e2f3a4b5c6d',
      url: 'https://billing.example.com/herald-webhooks',
      events: ['notification.created', 'email.failed'],
      description: 'billing service',
      enabled: true,
      createdAt: '2026-01-01T12:00:00.000Z',
    },
  });

export const DeliverySchema = z.object({
  id: z.string().describe('the event id, sent as the `webhook-id` header (the same on every retry)'),
  type: z.enum([...WEBHOOK_EVENT_TYPES, TEST_EVENT_TYPE]),
  status: z.enum(['pending', 'delivered', 'failed']),
  statusCode: z.number().int().nullable().describe('HTTP status of the latest attempt (null: no response)'),
  attempt: z.number().int().describe('attempts made so far'),
  nextRetryAt: z.string().nullable().describe('when the next attempt is due (pending only)'),
  error: z.string().nullable().describe('why the latest attempt failed'),
  createdAt: z.string(),
  lastAttemptAt: z.string().nullable(),
  deliveredAt: z.string().nullable(),
});

export function registerWebhookRoutes(
  app: FastifyInstance,
  service: WebhookService,
  sessions: SessionResolver,
): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const notFound = () => notFoundError('No such webhook');
  const idParams = z.object({ id: z.string().max(100) });

  r.post(
    '/admin/webhooks',
    {
      onRequest: requireAdmin(sessions),
      schema: {
        tags: ['admin'],
        security: [{ session: [] }],
        summary: 'Subscribe a URL to events',
        description:
          'The URL must be http(s) and resolve to public addresses only (unless WEBHOOK_ALLOW_PRIVATE_URLS=true). ' +
          'The `secret` signs every delivery (Standard Webhooks) and is shown only in this response.',
        body: CreateWebhookBodySchema.meta({
          example: {
            url: 'https://billing.example.com/herald-webhooks',
            events: ['notification.created', 'email.failed'],
            description: 'billing service',
          },
        }),
        response: {
          201: WebhookSchema.extend({
            secret: z.string().describe('whsec_… — shown only once; verifies the `webhook-signature` header'),
          }).describe('The new webhook, with its signing secret shown only here'),
          400: ErrorSchema,
          401: ErrorSchema,
          403: ErrorSchema,
        },
      },
    },
    async (request, reply) => {
      try {
        const created = await service.create(request.body, authOf(request).user.id);
        return reply.code(201).send(created);
      } catch (err) {
        if (err instanceof UrlRefused) throw validationError([{ path: 'body.url', message: err.message }]);
        throw err;
      }
    },
  );

  r.get(
    '/admin/webhooks',
    {
      onRequest: requireAdmin(sessions),
      schema: {
        tags: ['admin'],
        security: [{ session: [] }],
        summary: 'List webhooks (never their secrets)',
        response: {
          200: z.object({ webhooks: z.array(WebhookSchema) }).describe('Every webhook, newest first'),
          401: ErrorSchema,
          403: ErrorSchema,
        },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'no-store');
      return { webhooks: await service.list() };
    },
  );

  r.delete(
    '/admin/webhooks/:id',
    {
      onRequest: requireAdmin(sessions),
      schema: {
        tags: ['admin'],
        security: [{ session: [] }],
        summary: 'Delete a webhook',
        description: 'Its queued deliveries are dropped with it.',
        params: idParams,
        response: {
          200: z.object({ id: z.string() }).describe('The deleted webhook’s id'),
          401: ErrorSchema,
          403: ErrorSchema,
          404: ErrorSchema,
        },
      },
    },
    async (request) => {
      const { id } = request.params;
      if (!(await service.remove(id))) throw notFound();
      return { id };
    },
  );

  r.patch(
    '/admin/webhooks/:id',
    {
      onRequest: requireAdmin(sessions),
      schema: {
        tags: ['admin'],
        security: [{ session: [] }],
        summary: 'Change a webhook (URL, events, description, enabled)',
        description:
          'Provided fields replace the stored ones; the secret and queued deliveries are kept. A new URL is checked ' +
          'like a new webhook’s. A disabled webhook is offered no new events; its queued deliveries wait until it ' +
          'is enabled again. This instance applies the change before answering; the others are told over the bus.',
        params: idParams,
        body: UpdateWebhookBodySchema,
        response: {
          200: WebhookSchema.describe('The webhook as stored now'),
          400: ErrorSchema,
          401: ErrorSchema,
          403: ErrorSchema,
          404: ErrorSchema,
        },
      },
    },
    async (request) => {
      try {
        const webhook = await service.update(request.params.id, request.body);
        if (!webhook) throw notFound();
        return webhook;
      } catch (err) {
        if (err instanceof UrlRefused) throw validationError([{ path: 'body.url', message: err.message }]);
        throw err;
      }
    },
  );

  r.post(
    '/admin/webhooks/:id/rotate-secret',
    {
      onRequest: requireAdmin(sessions),
      schema: {
        tags: ['admin'],
        security: [{ session: [] }],
        summary: 'Replace a webhook’s signing secret',
        description:
          'For 24 hours every delivery carries both signatures, the old one first (`webhook-signature: v1,<old> ' +
          'v1,<new>`), so a receiver can switch to the new secret without losing a delivery. The new secret is ' +
          'shown only here.',
        params: idParams,
        response: {
          200: z
            .object({ secret: z.string().describe('whsec_… — shown only once') })
            .describe('The new signing secret'),
          401: ErrorSchema,
          403: ErrorSchema,
          404: ErrorSchema,
        },
      },
    },
    async (request, reply) => {
      const secret = await service.rotateSecret(request.params.id);
      if (!secret) throw notFound();
      reply.header('cache-control', 'no-store');
      return { secret };
    },
  );

  r.post(
    '/admin/webhooks/:id/test',
    {
      onRequest: requireAdmin(sessions),
      schema: {
        tags: ['admin'],
        security: [{ session: [] }],
        summary: 'Send a webhook.test event to this webhook',
        description:
          'Queued like any event (signed, retried, listed in the deliveries) whatever the webhook subscribes to: ' +
          '`{ "type": "webhook.test", "timestamp", "data": { "webhookId", "url" } }`.',
        params: idParams,
        response: {
          202: z
            .object({ id: z.string().describe('the event id (`webhook-id` header)') })
            .describe('The test event is queued'),
          401: ErrorSchema,
          403: ErrorSchema,
          404: ErrorSchema,
        },
      },
    },
    async (request, reply) => {
      const id = await service.sendTest(request.params.id);
      if (!id) throw notFound();
      return reply.code(202).send({ id });
    },
  );

  r.post(
    '/admin/webhooks/:id/deliveries/:deliveryId/redeliver',
    {
      onRequest: requireAdmin(sessions),
      schema: {
        tags: ['admin'],
        security: [{ session: [] }],
        summary: 'Send a logged delivery again',
        description:
          'The same event (same body and `webhook-id`, freshly signed) is queued again with a new retry window, ' +
          'whatever became of it before. `deliveryId` is the `id` the deliveries list shows.',
        params: z.object({ id: z.string().max(100), deliveryId: z.string().max(100) }),
        response: {
          202: z.object({ id: z.string() }).describe('The delivery is queued again'),
          401: ErrorSchema,
          403: ErrorSchema,
          404: ErrorSchema,
        },
      },
    },
    async (request, reply) => {
      const { id, deliveryId } = request.params;
      if ((await service.redeliver(id, deliveryId)) === 'not_found') {
        throw notFoundError('No such delivery');
      }
      return reply.code(202).send({ id: deliveryId });
    },
  );

  r.get(
    '/admin/webhooks/:id/deliveries',
    {
      onRequest: requireAdmin(sessions),
      schema: {
        tags: ['admin'],
        security: [{ session: [] }],
        summary: 'A webhook’s latest deliveries',
        description: 'Newest first, each with its latest attempt. Finished deliveries are kept 7 days.',
        params: idParams,
        querystring: z.object({ limit: z.coerce.number().int().min(1).max(500).default(100) }),
        response: {
          200: z.object({ deliveries: z.array(DeliverySchema) }).describe('The latest deliveries'),
          400: ErrorSchema,
          401: ErrorSchema,
          403: ErrorSchema,
          404: ErrorSchema,
        },
      },
    },
    async (request, reply) => {
      const deliveries = await service.deliveries(request.params.id, request.query.limit);
      if (!deliveries) throw notFound();
      reply.header('cache-control', 'no-store');
      return { deliveries };
    },
  );
}
