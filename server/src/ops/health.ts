// Owns GET /health: database and store checks with timeouts; 503 while shutting down or without a database.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { withTimeout } from '../http/timeout.js';

const CHECK_TIMEOUT_MS = 2_000;

async function check(run: () => Promise<void>): Promise<'ok' | 'error'> {
  try {
    await withTimeout(run(), CHECK_TIMEOUT_MS);
    return 'ok';
  } catch {
    return 'error';
  }
}

const HealthSchema = z.object({
  status: z.enum(['ok', 'degraded', 'error', 'shutting_down']),
  instanceId: z.string().optional(),
  checks: z
    .object({ database: z.enum(['ok', 'error']), cache: z.enum(['ok', 'error', 'disabled']) })
    .optional(),
});

export function registerHealth(app: FastifyInstance): void {
  const { lifecycle, database, store, config } = app.ctx;
  app.get(
    '/health',
    {
      schema: {
        tags: ['operations'],
        summary: 'Liveness and readiness',
        description:
          'No authentication and no rate limit, for load balancers. `degraded`: the shared store is down; every ' +
          'feature still works on this instance.',
        response: {
          200: HealthSchema.describe('Serving: `ok`, or `degraded` while the shared store is unreachable'),
          503: HealthSchema.describe('Not serving: shutting down, or the database is unreachable'),
        },
      },
    },
    async (_request, reply) => {
      if (lifecycle.isShuttingDown()) return reply.code(503).send({ status: 'shutting_down' });
      const [databaseCheck, cacheCheck] = await Promise.all([
        check(() => database.ping()),
        check(() => store.ping()),
      ]);
      const checks = { database: databaseCheck, cache: cacheCheck };
      if (databaseCheck === 'error') {
        return reply.code(503).send({ status: 'error', instanceId: config.INSTANCE_ID, checks });
      }
      const status = cacheCheck === 'ok' && !app.ctx.realtime.bus.isDegraded() ? 'ok' : 'degraded';
      return reply.send({ status, instanceId: config.INSTANCE_ID, checks });
    },
  );
}
