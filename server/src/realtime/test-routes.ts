// Test-only window into the real-time core, registered only when NODE_ENV=test, so multi-process tests can
// drive and observe the bus and presence of a child process over HTTP. Hidden from the OpenAPI document.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../config.js';
import type { Envelope } from './bus.js';
import type { Realtime } from './types.js';

export const TEST_ECHO_TOPIC = 'test.echo';
const KEEP = 1_000;

export function registerRealtimeTestRoutes(
  app: FastifyInstance,
  deps: { config: Pick<Config, 'NODE_ENV'>; realtime: Realtime },
): void {
  if (deps.config.NODE_ENV !== 'test') return;
  const { realtime } = deps;
  const r = app.withTypeProvider<ZodTypeProvider>();
  const received: Array<Pick<Envelope, 'id' | 'instanceId' | 'sentAt' | 'payload'>> = [];
  realtime.bus.subscribe(TEST_ECHO_TOPIC, (payload, envelope) => {
    received.push({ id: envelope.id, instanceId: envelope.instanceId, sentAt: envelope.sentAt, payload });
    if (received.length > KEEP) received.shift();
  });
  const held = new Map<string, () => void>();
  const hide = { hide: true } as const;

  r.post(
    '/__test/realtime/publish',
    {
      schema: {
        ...hide,
        body: z.object({ payload: z.unknown(), count: z.number().int().min(1).max(10_000).optional() }),
      },
    },
    async (request) => {
      for (let i = 0; i < (request.body.count ?? 1); i++) {
        await realtime.bus.publish(TEST_ECHO_TOPIC, request.body.payload ?? null);
      }
      return { ok: true };
    },
  );
  r.get('/__test/realtime/received', { schema: hide }, async () => ({ received }));
  r.post(
    '/__test/realtime/online',
    { schema: { ...hide, body: z.object({ handle: z.string(), userId: z.string() }) } },
    async (request) => {
      held.set(request.body.handle, realtime.presence.userConnected(request.body.userId));
      return { ok: true };
    },
  );
  r.post(
    '/__test/realtime/offline',
    { schema: { ...hide, body: z.object({ handle: z.string() }) } },
    async (request) => {
      held.get(request.body.handle)?.();
      held.delete(request.body.handle);
      return { ok: true };
    },
  );
  r.post(
    '/__test/realtime/chat-join',
    {
      schema: {
        ...hide,
        body: z.object({
          connectionId: z.string(),
          role: z.enum(['guest', 'member', 'admin']),
          userId: z.string().nullable(),
        }),
      },
    },
    async (request) => {
      realtime.presence.chatJoin(request.body.connectionId, request.body.role, request.body.userId);
      return { ok: true };
    },
  );
  r.get(
    '/__test/realtime/presence',
    { schema: { ...hide, querystring: z.object({ userIds: z.string().optional() }) } },
    async (request) => {
      const ids = (request.query.userIds ?? '').split(',').filter(Boolean);
      const [online, counts] = await Promise.all([
        realtime.presence.onlineAmong(ids),
        realtime.presence.chatCounts(),
      ]);
      return { online: [...online].sort(), counts };
    },
  );
  // Memory of this process for bench/memory.ts: after a full collection when the process runs with
  // --expose-gc (NODE_OPTIONS), so the heap figure is what connections keep alive, not garbage.
  r.get('/__test/memory', { schema: hide }, async () => {
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    const m = process.memoryUsage();
    return {
      collected: gc !== undefined,
      rss: m.rss,
      heapUsed: m.heapUsed,
      heapTotal: m.heapTotal,
      external: m.external,
      arrayBuffers: m.arrayBuffers,
    };
  });
}
