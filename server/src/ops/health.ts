// Owns GET /health: database and store checks with timeouts, their result reused for HEALTH_CACHE_MS (load
// balancers poll it); 503 at once while shutting down or overloaded, and without a database.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Config } from '../config.js';
import type { OverloadMonitor } from '../http/overload.js';
import type { Database } from '../infra/db.js';
import type { Store } from '../infra/store.js';
import { withTimeout } from '../infra/timeout.js';
import type { Realtime } from '../realtime/index.js';
import type { Lifecycle } from './lifecycle.js';

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
    .object({
      database: z.enum(['ok', 'error']),
      cache: z.enum(['ok', 'error', 'disabled']),
      load: z.enum(['overloaded']).optional(),
    })
    .optional(),
});

type CheckResult = { database: 'ok' | 'error'; cache: 'ok' | 'error' };

export interface HealthDeps {
  config: Config;
  lifecycle: Pick<Lifecycle, 'isShuttingDown'>;
  database: Pick<Database, 'ping'>;
  store: Store;
  overload: OverloadMonitor;
  realtime: Realtime;
}

export function registerHealth(app: FastifyInstance, deps: HealthDeps): void {
  const { lifecycle, database, store, config, overload } = deps;
  // One check in flight at a time, its result reused for HEALTH_CACHE_MS: at thousands of polls a second every
  // poll used to cost a PostgreSQL and a store round trip. A result is at most that old; a failing database
  // turns health 503 within HEALTH_CACHE_MS (+ the check's own timeout).
  let cached: { at: number; done: boolean; result: Promise<CheckResult> } | undefined;
  let lastResult: CheckResult | undefined;
  const runChecks = async (): Promise<CheckResult> => {
    const [databaseCheck, cacheCheck] = await Promise.all([
      check(() => database.ping()),
      check(() => store.ping()),
    ]);
    lastResult = { database: databaseCheck, cache: cacheCheck };
    return lastResult;
  };
  const checks = (): Promise<CheckResult> => {
    // A check in flight is shared whatever its age (it ends within the checks' own timeout).
    if (cached && (!cached.done || performance.now() - cached.at < config.HEALTH_CACHE_MS)) {
      return cached.result;
    }
    const entry = { at: 0, done: false, result: runChecks() };
    cached = entry;
    // Age counts from when the check finished, so a slow check is not reused for less than the window.
    void entry.result.then(() => {
      entry.at = performance.now();
      entry.done = true;
    });
    return entry.result;
  };
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
          503: HealthSchema.describe(
            'Not serving: shutting down, overloaded (`checks.load`), or the database is unreachable',
          ),
        },
      },
    },
    async (_request, reply) => {
      if (lifecycle.isShuttingDown()) return reply.code(503).send({ status: 'shutting_down' });
      // The instance as a whole, not one client's burst (the per-client limits answer that with 429s).
      if (overload.instanceOverloaded()) {
        // Tell the load balancer to send traffic elsewhere, from the last result when there is one: an
        // overloaded instance must not make the poll wait for a check.
        const result = lastResult ?? (await checks());
        return reply
          .code(503)
          .header('retry-after', String(config.OVERLOAD_RETRY_AFTER_S))
          .send({
            status: 'error',
            instanceId: config.INSTANCE_ID,
            checks: { ...result, load: 'overloaded' },
          });
      }
      const result = await checks();
      if (result.database === 'error') {
        return reply.code(503).send({ status: 'error', instanceId: config.INSTANCE_ID, checks: result });
      }
      const status = result.cache === 'ok' && !deps.realtime.bus.isDegraded() ? 'ok' : 'degraded';
      return reply.send({ status, instanceId: config.INSTANCE_ID, checks: result });
    },
  );
}
