// Owns GET /metrics: the contract's JSON report (docs/api.md#operations) and, through ops/prometheus.ts, the same figures
// plus latency histograms and process metrics in Prometheus text format.
// Access: `Authorization: Bearer <METRICS_API_KEY>` (compared in constant time), an API key (`hk_…`) with the
// `metrics:read` scope, or an admin session. No credentials → 401; a wrong METRICS_API_KEY or a non-admin session
// → 403; an unknown, revoked or expired API key → 401 and one without the scope → 403 (api-keys/service.ts).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ApiKeyService } from '../api-keys/index.js';
import type { SessionResolver } from '../auth/guard.js';
import type { Config } from '../config.js';
import { forbidden, unauthorized } from '../http/errors.js';
import { ErrorSchema } from '../http/schemas.js';
import type { Database } from '../infra/db.js';
import type { EmailOutbox } from '../infra/email-outbox.js';
import type { Logger } from '../infra/logger.js';
import type { Push } from '../push/index.js';
import type { InstanceRecord, Realtime } from '../realtime/index.js';
import type { Webhooks } from '../webhooks/index.js';

/** Prometheus text exposition format 0.0.4 (ops/prometheus.ts renders it). */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** What the report and its access check read (the composition root passes what it wired). */
export interface MetricsSources {
  config: Pick<Config, 'METRICS_API_KEY' | 'INSTANCE_ID'>;
  logger: Logger;
  realtime: Realtime;
  outbox: Pick<EmailOutbox, 'stats'>;
  webhooks: { worker: Pick<Webhooks['worker'], 'stats'> };
  sessions: Pick<SessionResolver, 'fromHeaders'>;
  database: Pick<Database, 'poolStats' | 'reads'>;
  push: Pick<Push, 'worker'>;
}

const InstanceSchema = z.object({
  instanceId: z.string(),
  startedAt: z.number().describe('epoch ms'),
  lastHeartbeat: z.number().describe('epoch ms'),
  connectedClients: z.number().int(),
});

export const MetricsSchema = z
  .object({
    timestamp: z.number().describe('epoch ms when the report was made'),
    instanceId: z.string(),
    distributedMode: z.boolean(),
    pubsub: z.object({
      messagesPublished: z.number().int(),
      messagesReceived: z.number().int(),
      publishFailures: z.number().int(),
      averageLatencyMs: z.number(),
      maxLatencyMs: z.number(),
      isDegraded: z.boolean(),
      uptime: z.number().describe('seconds since this instance started'),
    }),
    chat: z.object({ connectedClients: z.number().int() }),
    cluster: z.object({ activeInstances: z.number().int(), instances: z.array(InstanceSchema) }),
    bus: z
      .object({
        malformedDropped: z.number().int(),
        duplicatesDropped: z.number().int(),
        echoesSkipped: z.number().int(),
        degradedTransitions: z.number().int(),
      })
      .describe('extra detail beyond the contract'),
    email: z
      .object({
        pending: z.number().int().describe('emails queued and not yet sent (queue depth), cluster-wide'),
        failed: z
          .number()
          .int()
          .describe('emails given up after EMAIL_MAX_ATTEMPTS (last 7 days), cluster-wide'),
        sent: z.number().int().describe('emails sent (last 7 days), cluster-wide'),
        attemptFailures: z.number().int().describe('failed send attempts on this instance since start'),
      })
      .optional()
      .describe('durable email queue (absent when the database could not be read)'),
    webhooks: z
      .object({
        pending: z
          .number()
          .int()
          .describe('webhook deliveries queued and not yet delivered (queue depth), cluster-wide'),
        failed: z
          .number()
          .int()
          .describe('deliveries given up after WEBHOOK_RETRY_WINDOW_MS (last 7 days), cluster-wide'),
        delivered: z.number().int().describe('deliveries answered with a 2xx (last 7 days), cluster-wide'),
        attemptFailures: z.number().int().describe('failed delivery attempts on this instance since start'),
      })
      .optional()
      .describe('durable webhook queue (absent when the database could not be read)'),
    database: z
      .object({
        pools: z
          .array(
            z.object({
              pool: z.string().describe('`primary`, or `replica:<host:port>`'),
              total: z.number().int().describe('connections open'),
              idle: z.number().int().describe('connections open and unused'),
              waiting: z.number().int().describe('queries waiting for a connection'),
            }),
          )
          .describe('this instance’s PostgreSQL pools (none on the embedded database)'),
        reads: z
          .object({
            primary: z.number().int(),
            replica: z.number().int(),
            fallbacks: z
              .number()
              .int()
              .describe('reads that failed on a replica and were answered by the primary'),
            probes: z
              .object({ primary: z.number().int(), replica: z.number().int() })
              .describe(
                'reads whose position no replica was known to have yet, so one replica was asked directly: by where they then ran',
              ),
            byFeature: z
              .record(
                z.enum(['notifications', 'chat']),
                z.object({ primary: z.number().int(), replica: z.number().int() }),
              )
              .describe('the same reads per feature'),
          })
          .describe(
            'replica-eligible reads (notification lists and counts, chat history and room lists) by where they ran, since start',
          ),
        replicas: z.array(
          z.object({
            name: z.string(),
            up: z.boolean(),
            eligible: z.boolean().describe('serving reads now: up and within DATABASE_READ_MAX_LAG_MS'),
            lagMs: z.number().nullable().describe('behind the primary, in ms (null while down or unknown)'),
          }),
        ),
      })
      .optional()
      .describe('PostgreSQL pools and read replicas (docs/operations.md, "PostgreSQL past one server")'),

    push: z
      .object({
        pending: z
          .number()
          .int()
          .describe('push messages queued and not yet sent (queue depth), cluster-wide'),
        sent: z.number().int().describe('messages accepted by a push service on this instance since start'),
        attemptFailures: z
          .number()
          .int()
          .describe('failed push attempts on this instance since start (each retry counts)'),
        givenUp: z
          .number()
          .int()
          .describe('messages given up on this instance since start (4xx, expired, subscription gone)'),
        subscriptionsRemoved: z
          .number()
          .int()
          .describe('subscriptions removed after a 404/410 on this instance since start'),
      })
      .optional()
      .describe('Web Push queue (absent when push is off or the database could not be read)'),
  })
  .meta({
    example: {
      timestamp: 1_767_000_000_000,
      instanceId: 'api-1',
      distributedMode: true,
      pubsub: {
        messagesPublished: 1200,
        messagesReceived: 2380,
        publishFailures: 0,
        averageLatencyMs: 0.8,
        maxLatencyMs: 12,
        isDegraded: false,
        uptime: 3600,
      },
      chat: { connectedClients: 42 },
      cluster: {
        activeInstances: 2,
        instances: [
          {
            instanceId: 'api-1',
            startedAt: 1_766_996_400_000,
            lastHeartbeat: 1_766_999_995_000,
            connectedClients: 42,
          },
          {
            instanceId: 'api-2',
            startedAt: 1_766_996_400_000,
            lastHeartbeat: 1_766_999_998_000,
            connectedClients: 37,
          },
        ],
      },
      bus: { malformedDropped: 0, duplicatesDropped: 0, echoesSkipped: 1200, degradedTransitions: 0 },
      email: { pending: 0, failed: 0, sent: 118, attemptFailures: 2 },
      webhooks: { pending: 3, failed: 0, delivered: 512, attemptFailures: 7 },
      push: { pending: 0, sent: 240, attemptFailures: 3, givenUp: 1, subscriptionsRemoved: 1 },
    },
  });

export type MetricsReport = z.infer<typeof MetricsSchema>;

/** Hashing both sides first makes the comparison constant-time whatever the lengths. */
function sameSecret(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

async function authorize(
  ctx: MetricsSources,
  apiKeys: ApiKeyService,
  request: FastifyRequest,
): Promise<void> {
  const header = request.headers.authorization;
  const key = ctx.config.METRICS_API_KEY;
  if (apiKeys.isApiKeyHeader(header)) {
    request.apiKey = await apiKeys.authenticate(header, 'metrics:read');
    return;
  }
  if (header !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (key && match?.[1] && sameSecret(match[1], key)) return;
  }
  let session: Awaited<ReturnType<SessionResolver['fromHeaders']>>;
  try {
    session = await ctx.sessions.fromHeaders(request.headers);
  } catch (err) {
    // A wrong key stays a 403 even when sessions cannot be read (store outage).
    if (header !== undefined) throw forbidden('Invalid metrics key');
    throw err;
  }
  if (session?.user.role === 'admin') return;
  if (header !== undefined || session) {
    throw forbidden(session && header === undefined ? 'Administrator role required' : 'Invalid metrics key');
  }
  throw unauthorized();
}

export async function collectMetrics(ctx: MetricsSources): Promise<MetricsReport> {
  const { realtime, config } = ctx;
  const stats = realtime.bus.stats();
  const now = Date.now();
  const startedAt = realtime.startedAt;
  const localClients = realtime.presence.localChatConnections();
  // The queue figures need the database; a report without them beats no report during a database outage.
  const email = await ctx.outbox.stats().catch((err: unknown) => {
    ctx.logger.warn({ err }, 'metrics: email queue figures unavailable');
    return undefined;
  });
  const webhooks = await ctx.webhooks.worker.stats().catch((err: unknown) => {
    ctx.logger.warn({ err }, 'metrics: webhook queue figures unavailable');
    return undefined;
  });
  const push = await ctx.push.worker?.stats().catch((err: unknown) => {
    ctx.logger.warn({ err }, 'metrics: push queue figures unavailable');
    return undefined;
  });
  const instances: InstanceRecord[] = await realtime.instances();
  const primaryPool = ctx.database.poolStats?.();
  const reads = ctx.database.reads?.stats();
  const database = {
    pools: [
      ...(primaryPool ? [{ pool: 'primary', ...primaryPool }] : []),
      ...(reads?.replicas ?? []).map((r) => ({ pool: `replica:${r.name}`, ...r.pool })),
    ],
    reads: {
      primary: reads?.reads.primary ?? 0,
      replica: reads?.reads.replica ?? 0,
      fallbacks: reads?.fallbacks ?? 0,
      probes: reads?.probes ?? { primary: 0, replica: 0 },
      byFeature: reads?.byFeature ?? {
        notifications: { primary: 0, replica: 0 },
        chat: { primary: 0, replica: 0 },
      },
    },
    replicas: (reads?.replicas ?? []).map(({ name, up, eligible, lagMs }) => ({ name, up, eligible, lagMs })),
  };
  return {
    timestamp: now,
    instanceId: config.INSTANCE_ID,
    distributedMode: realtime.distributed,
    pubsub: {
      messagesPublished: stats.messagesPublished,
      messagesReceived: stats.messagesReceived,
      publishFailures: stats.publishFailures,
      averageLatencyMs: stats.averageLatencyMs,
      maxLatencyMs: stats.maxLatencyMs,
      isDegraded: realtime.bus.isDegraded(),
      uptime: Math.round((now - startedAt) / 100) / 10,
    },
    chat: { connectedClients: localClients },
    cluster: { activeInstances: instances.length, instances },
    bus: {
      malformedDropped: stats.malformedDropped,
      duplicatesDropped: stats.duplicatesDropped,
      echoesSkipped: stats.echoesSkipped,
      degradedTransitions: stats.degradedTransitions,
    },
    email,
    webhooks,
    database,

    push,
  };
}

function wantsPrometheus(request: FastifyRequest, format: string | undefined): boolean {
  if (format) return format === 'prometheus';
  const accept = request.headers.accept ?? '';
  return /\btext\/plain\b/i.test(accept) && !/\bapplication\/json\b/i.test(accept);
}

export interface MetricsDeps {
  sources: MetricsSources;
  apiKeys: ApiKeyService;
  /** The Prometheus rendering of a report (ops/prometheus.ts imports this module, so it is passed in). */
  renderPrometheus(report: MetricsReport, live: { sseStreams: number }): Promise<string>;
  /** Open SSE streams on this instance (the notifications feature's hub). */
  sseStreams(): number;
}

export function registerMetrics(app: FastifyInstance, deps: MetricsDeps): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/metrics',
    {
      schema: {
        tags: ['operations'],
        summary: 'Instance and cluster metrics (JSON or Prometheus text)',
        // Either credential passes: a scraper's bearer key, or an administrator's session cookie.
        security: [{ metricsKey: [] }, { apiKey: [] }, { session: [] }],
        description:
          'Admin session, `Authorization: Bearer <METRICS_API_KEY>`, or `Authorization: Bearer <API key>` with the ' +
          '`metrics:read` scope. No credentials → 401; a wrong METRICS_API_KEY or a non-admin session → 403; an ' +
          'unknown, revoked or expired API key → 401, one without the scope → 403, over its limit → 429. With `Accept: text/plain` or `?format=prometheus` the same figures in ' +
          'Prometheus text format (version 0.0.4).',
        querystring: z.object({ format: z.enum(['json', 'prometheus']).optional() }),
        response: {
          200: {
            description:
              'The report: JSON by default, Prometheus text with `Accept: text/plain` or `?format=prometheus`',
            content: {
              'application/json': { schema: MetricsSchema },
              'text/plain; version=0.0.4': { schema: z.string() },
            },
          },
          401: ErrorSchema,
          403: ErrorSchema,
          429: ErrorSchema,
        },
      },
    },
    async (request, reply) => {
      await authorize(deps.sources, deps.apiKeys, request);
      const report = await collectMetrics(deps.sources);
      reply.header('cache-control', 'no-store');
      if (wantsPrometheus(request, request.query.format)) {
        const text = await deps.renderPrometheus(report, { sseStreams: deps.sseStreams() });
        return reply.type(PROMETHEUS_CONTENT_TYPE).send(text);
      }
      return report;
    },
  );
}
