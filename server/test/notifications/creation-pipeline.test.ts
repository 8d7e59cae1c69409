// The broadcast write pipeline of notifications/service/creation.ts on its own: the repository is scripted, because
// a batch statement that fails exactly while others are in flight cannot be produced on demand with a real
// PostgreSQL. The real path (the same code, BROADCAST_WRITE_CONCURRENCY 2 by default) runs in
// test/admin/broadcast.test.ts and the cluster tests.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { Delivery } from '../../src/notifications/delivery.js';
import type { CreatedNotification, NotificationRepository } from '../../src/notifications/repository.js';
import type { Notification } from '../../src/notifications/schemas.js';
import { createNotificationCreator } from '../../src/notifications/service/creation.js';
import type { EventPublisher } from '../../src/notifications/service/publisher.js';
import type { UnreadCache } from '../../src/notifications/unread-cache.js';

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

function rowFor(userId: string): CreatedNotification {
  const notification = {
    id: `n-${userId}`,
    userId,
    type: 'announcement',
    title: 't',
    content: 'c',
    metadata: {},
    read: false,
    createdAt: new Date().toISOString(),
    updatedAt: new Date().toISOString(),
  } as unknown as Notification;
  return { notification, seq: 1, unreadCount: 1 };
}

function harness(opts: { concurrency: number; failBatch?: number; delays?: number[] }) {
  let inFlight = 0;
  let maxInFlight = 0;
  let calls = 0;
  const published: string[][] = [];
  const delivered: string[][] = [];
  const repo = {
    async insertForUsers(userIds: string[]) {
      const n = calls++;
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await tick(opts.delays?.[n] ?? 5);
      inFlight--;
      if (n === opts.failBatch) throw new Error(`batch ${n} failed`);
      return { created: userIds.map(rowFor), existing: [] };
    },
  } as unknown as NotificationRepository;
  const creator = createNotificationCreator({
    repo,
    unread: { invalidate: async () => {} } as unknown as UnreadCache,
    publisher: {
      publishCreated: async (_t: unknown, created: CreatedNotification[]) => {
        published.push(created.map((c) => c.notification.userId));
      },
    } as unknown as EventPublisher,
    delivery: {
      deliver: async (items: Array<{ userId: string }>) => {
        delivered.push(items.map((i) => i.userId));
        return { sent: new Set<string>(), timings: {} };
      },
    } as unknown as Delivery,
    policy: { allowedHosts: [] } as never,
    logger: pino({ level: 'silent' }),
    batchSize: 2,
    writeConcurrency: opts.concurrency,
  });
  return { creator, published, delivered, stats: () => ({ maxInFlight, calls }) };
}

const input = { type: 'announcement', title: 'Hello', content: 'World' } as const;
const users = Array.from({ length: 10 }, (_, i) => `u${i}`);

describe('broadcast write pipeline', () => {
  it('keeps up to BROADCAST_WRITE_CONCURRENCY statements in flight and finishes the batches in order', async () => {
    // The first batch is the slowest: later ones finish writing first, yet are published after it.
    const h = harness({ concurrency: 3, delays: [40, 5, 5, 5, 5] });
    const progress: number[] = [];
    const result = await h.creator.createInBatches([users], input, {
      onBatch: (b) => progress.push(b.created),
    });
    expect(result.createdCount).toBe(10);
    expect(h.stats()).toEqual({ maxInFlight: 3, calls: 5 });
    expect(h.published).toEqual([
      ['u0', 'u1'],
      ['u2', 'u3'],
      ['u4', 'u5'],
      ['u6', 'u7'],
      ['u8', 'u9'],
    ]);
    expect(h.delivered).toEqual(h.published);
    expect(progress).toEqual([2, 2, 2, 2, 2]);
  });

  it('writes one statement at a time at concurrency 1', async () => {
    const h = harness({ concurrency: 1 });
    await h.creator.createInBatches([users], input, {});
    expect(h.stats()).toEqual({ maxInFlight: 1, calls: 5 });
  });

  it('a failed statement fails the send, and every batch that committed still gets its events and delivery', async () => {
    const h = harness({ concurrency: 2, failBatch: 1, delays: [5, 5, 30] });
    await expect(h.creator.createInBatches([users], input, {})).rejects.toThrow('batch 1 failed');
    // Batch 0 finished before the failure was seen; batch 2 was already being written and committed.
    expect(h.published).toEqual([
      ['u0', 'u1'],
      ['u4', 'u5'],
    ]);
    expect(h.stats().calls).toBe(3);
  });

  it('a send stopped by its signal writes nothing more and settles the statements in flight', async () => {
    const controller = new AbortController();
    const h = harness({ concurrency: 2, delays: [5, 20, 5, 5, 5] });
    const sending = h.creator.createInBatches([users], input, {
      signal: controller.signal,
      onBatch: () => controller.abort(new Error('shutting down')),
    });
    await expect(sending).rejects.toThrow('shutting down');
    const { calls } = h.stats();
    expect(calls).toBeLessThan(5);
    expect(h.published.flat()).toHaveLength(calls * 2);
  });
});
