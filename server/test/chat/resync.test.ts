// The owed room syncs of chat/service/resync.ts on their own: the publish is scripted (a failing store cannot be
// ordered to fail exactly on the n-th publish); rooms-outage.test.ts shows the whole path on two real instances.
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createResync, type Resync } from '../../src/chat/service/resync.js';

const logger = pino({ level: 'silent' });

describe('owed room syncs', () => {
  let resync: Resync | undefined;
  afterEach(() => resync?.stop());

  it('publishes the highest owed revision per room until a publish gets through', async () => {
    const published: Array<[string, number]> = [];
    let failuresLeft = 2;
    resync = createResync({
      publishSync: async (roomId, rev) => {
        published.push([roomId, rev]);
        return failuresLeft-- <= 0;
      },
      isDegraded: () => false,
      logger,
      retryMs: 10,
    });
    resync.owe('r1', 3);
    resync.owe('r1', 5);
    resync.owe('r1', 4);
    expect(resync.owed()).toBe(1);
    for (let i = 0; i < 200 && resync.owed() > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(resync.owed()).toBe(0);
    expect(published).toEqual([
      ['r1', 5],
      ['r1', 5],
      ['r1', 5],
    ]);
  });

  it('sends nothing while the bus is degraded, and everything owed when flushed after recovery', async () => {
    let degraded = true;
    const published: Array<[string, number]> = [];
    resync = createResync({
      publishSync: async (roomId, rev) => {
        published.push([roomId, rev]);
        return true;
      },
      isDegraded: () => degraded,
      logger,
      retryMs: 10,
    });
    resync.owe('a', 1);
    resync.owe('b', 7);
    await new Promise((r) => setTimeout(r, 60));
    expect(published).toEqual([]);
    expect(resync.owed()).toBe(2);
    degraded = false;
    await resync.flush();
    expect(published.sort()).toEqual([
      ['a', 1],
      ['b', 7],
    ]);
    expect(resync.owed()).toBe(0);
  });

  it('keeps a room owed when a newer change failed while its sync was out', async () => {
    let release: (ok: boolean) => void = () => {};
    const calls: number[] = [];
    resync = createResync({
      publishSync: (_roomId, rev) => {
        calls.push(rev);
        return new Promise<boolean>((resolve) => {
          release = resolve;
        });
      },
      isDegraded: () => false,
      logger,
      retryMs: 10_000,
    });
    resync.owe('r', 1);
    const flushing = resync.flush();
    resync.owe('r', 2);
    release(true);
    await flushing;
    expect(calls).toEqual([1]);
    expect(resync.owed()).toBe(1);
    const again = resync.flush();
    release(true);
    await again;
    expect(calls).toEqual([1, 2]);
    expect(resync.owed()).toBe(0);
  });
});
