// Registers the admin routes that manage webhooks: POST/GET /admin/webhooks, DELETE /admin/webhooks/:id,
// GET /admin/webhooks/:id/deliveries (admin session; docs/api.md#webhooks).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { authOf, requireAdmin } from '../auth/guard.js';
import { AppError, validationError } from '../http/errors.js';
import { ErrorSchema, noNul } from '../http/schemas.js';
import { WebhookErrorCode } from './errors.js';
import { WEBHOOK_EVENT_TYPES } from './events.js';
import type { WebhookService } from './service.js';
import { UrlRefused } from './ssrf.js';

export const CreateWebhookBodySchema = z.strictObject({
  url: z.string().trim().min(1).max(2048).refine(noNul, 'must not contain NUL characters'),
  events: z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1).max(WEBHOOK_EVENT_TYPES.length),
  description: z.string().trim().max(500).refine(noNul, 'must not contain NUL characters').optional(),
});

export const WebhookSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    events: z.array(z.enum(WEBHOOK_EVENT_TYPES)),
    description: z.string().nullable(),
    createdAt: z.string(),
  })
  .meta({
    example: {
      id: '8d1f6c2a-5b7e-4f3a-9c0d-1e2f3a4b5c6d',
      url: 'https://billing.example.com/herald-webhooks',
      events: ['notification.created', 'email.failed'],
      description: 'billing service',
      createdAt: '2026-01-01T12:00:00.000Z',
    },
  });

export const DeliverySchema = z.object({
  id: z.string().describe('the event id, sent as the `webhook-id` header (the same on every retry)'),
  type: z.enum(WEBHOOK_EVENT_TYPES),
  status: z.enum(['pending', 'delivered', 'failed']),
  statusCode: z.number().int().nullable().describe('HTTP status of the latest attempt (null: no response)'),
  attempt: z.number().int().describe('attempts made so far'),
  nextRetryAt: z.string().nullable().describe('when the next attempt is due (pending only)'),
  error: z.string().nullable().describe('why the latest attempt failed'),
  createdAt: z.string(),
  lastAttemptAt: z.string().nullable(),
  deliveredAt: z.string().nullable(),
});

export function registerWebhookRoutes(app: FastifyInstance, service: WebhookService): void {
  const { sessions } = app.ctx;
  const r = app.withTypeProvider<ZodTypeProvider>();
  const notFound = () => new AppError(404, WebhookErrorCode.NOT_FOUND, 'No such webhook');
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
