// Registers the admin routes that manage API keys: POST/GET /admin/api-keys, DELETE /admin/api-keys/:id
// (admin session; docs/api.md#api-keys).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { authOf, requireAdmin, type SessionResolver } from '../auth/guard.js';
import { CONTROL_MESSAGE, hasControl, hasInvisible, INVISIBLE_MESSAGE } from '../http/display-text.js';
import { notFound, validationError } from '../http/errors.js';
import { ErrorSchema, noNul } from '../http/schemas.js';
import { API_KEY_SCOPES, type ApiKeyService } from './service.js';

export const CreateApiKeyBodySchema = z.strictObject({
  name: z
    .string()
    .trim()
    .min(1)
    .max(100)
    .refine(noNul, 'must not contain NUL characters')
    // Listed to every administrator: one line, nothing invisible (issue 22 #8).
    .refine((v) => !hasControl(v), CONTROL_MESSAGE)
    .refine((v) => !hasInvisible(v), INVISIBLE_MESSAGE),
  scopes: z.array(z.enum(API_KEY_SCOPES)).min(1).max(API_KEY_SCOPES.length),
  expiresAt: z.iso
    .datetime({ offset: true })
    .optional()
    .describe('when the key stops working (must be in the future)'),
});

export const ApiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    scopes: z.array(z.enum(API_KEY_SCOPES)),
    prefix: z.string().describe('the first characters of the key, to tell keys apart'),
    createdBy: z
      .string()
      .nullable()
      .describe(
        'user id of the administrator who created the key; the key stops working once that user is banned, ' +
          'loses the admin role or is deleted (null)',
      ),
    createdAt: z.string(),
    expiresAt: z.string().nullable(),
    lastUsedAt: z.string().nullable().describe('updated in batches every few seconds'),
  })
  .meta({
    example: {
      id: '3f0c2b1e-8f4b-4d7e-9a51-2f2d1c0e6b7a',
      name: 'billing-service',
      scopes: ['notifications:send'],
      prefix: 'hk_Q2x9vT0a',
      createdBy: 'Xr4mQ2pZ8kL1vN6tB3yW7cD9fH0jS5aE',
      createdAt: '2026-01-01T12:00:00.000Z',
      expiresAt: null,
      lastUsedAt: '2026-01-02T08:30:00.000Z',
    },
  });

export function registerApiKeyRoutes(
  app: FastifyInstance,
  service: ApiKeyService,
  sessions: SessionResolver,
): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  r.post(
    '/admin/api-keys',
    {
      onRequest: requireAdmin(sessions),
      schema: {
        tags: ['admin'],
        security: [{ session: [] }],
        summary: 'Create an API key for a backend',
        description:
          'Scopes: `notifications:send` (POST /admin/notifications/send) and `metrics:read` (GET /metrics). The ' +
          '`key` is shown only in this response and stored only as a hash.',
        body: CreateApiKeyBodySchema.meta({
          example: { name: 'billing-service', scopes: ['notifications:send'] },
        }),
        response: {
          201: ApiKeySchema.extend({
            key: z.string().describe('hk_… — shown only once; send it as `Authorization: Bearer <key>`'),
          }).describe('The new key, with the secret shown only here'),
          400: ErrorSchema,
          401: ErrorSchema,
          403: ErrorSchema,
        },
      },
    },
    async (request, reply) => {
      const { expiresAt, ...rest } = request.body;
      const expires = expiresAt === undefined ? undefined : new Date(expiresAt);
      if (expires && expires.getTime() <= Date.now()) {
        throw validationError([{ path: 'body.expiresAt', message: 'must be in the future' }]);
      }
      const created = await service.create({ ...rest, expiresAt: expires }, authOf(request).user.id);
      return reply.code(201).send(created);
    },
  );

  r.get(
    '/admin/api-keys',
    {
      onRequest: requireAdmin(sessions),
      schema: {
        tags: ['admin'],
        security: [{ session: [] }],
        summary: 'List API keys (never the keys themselves)',
        response: {
          200: z.object({ apiKeys: z.array(ApiKeySchema) }).describe('Every key, newest first'),
          401: ErrorSchema,
          403: ErrorSchema,
        },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'no-store');
      return { apiKeys: await service.list() };
    },
  );

  r.delete(
    '/admin/api-keys/:id',
    {
      onRequest: requireAdmin(sessions),
      schema: {
        tags: ['admin'],
        security: [{ session: [] }],
        summary: 'Revoke an API key',
        description:
          'In force on every instance once this returns: keys are checked against the database on each use.',
        params: z.object({ id: z.string().max(100) }),
        response: {
          200: z.object({ id: z.string() }).describe('The revoked key’s id'),
          401: ErrorSchema,
          403: ErrorSchema,
          404: ErrorSchema,
        },
      },
    },
    async (request) => {
      const { id } = request.params;
      if (!(await service.revoke(id))) throw notFound('No such API key');
      return { id };
    },
  );
}
