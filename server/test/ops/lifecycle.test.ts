// The shutdown sequence itself: phase order, split runs (preClose then onClose), failing and stuck steps.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createLifecycle, SHUTDOWN_PHASES } from '../../src/ops/lifecycle.js';

describe('lifecycle', () => {
  it('runs every phase in contract order, steps of one phase together', async () => {
    const lifecycle = createLifecycle();
    const order: string[] = [];
    for (const phase of [...SHUTDOWN_PHASES].reverse()) {
      lifecycle.onShutdown(phase, `${phase}-a`, async () => {
        order.push(`${phase}-a`);
      });
      lifecycle.onShutdown(phase, `${phase}-b`, () => {
        order.push(`${phase}-b`);
      });
    }
    expect(lifecycle.isShuttingDown()).toBe(false);
    await lifecycle.shutdown();
    expect(lifecycle.isShuttingDown()).toBe(true);
    expect(order).toEqual(SHUTDOWN_PHASES.flatMap((p) => [`${p}-a`, `${p}-b`]));
    expect(lifecycle.completedPhases()).toEqual([...SHUTDOWN_PHASES]);
  });

  it('runs each phase once across runThrough and shutdown, even when called concurrently', async () => {
    const lifecycle = createLifecycle();
    const order: string[] = [];
    for (const phase of SHUTDOWN_PHASES) lifecycle.onShutdown(phase, phase, () => void order.push(phase));
    await lifecycle.runThrough('close-connections');
    expect(order).toEqual(['stop-accepting', 'drain-requests', 'notify-clients', 'close-connections']);
    await Promise.all([lifecycle.shutdown(), lifecycle.shutdown(), lifecycle.runThrough('deregister')]);
    expect(order).toEqual([...SHUTDOWN_PHASES]);
  });

  it('flips isShuttingDown at beginShutdown, before any phase runs', () => {
    const lifecycle = createLifecycle();
    lifecycle.beginShutdown();
    expect(lifecycle.isShuttingDown()).toBe(true);
    expect(lifecycle.completedPhases()).toEqual([]);
  });

  it('reports a failing step and carries on', async () => {
    const lifecycle = createLifecycle();
    const errors: string[] = [];
    let poolsClosed = false;
    lifecycle.onShutdown('notify-clients', 'bad', () => {
      throw new Error('boom');
    });
    lifecycle.onShutdown('close-pools', 'pools', () => {
      poolsClosed = true;
    });
    await lifecycle.shutdown((name) => errors.push(name));
    expect(errors).toEqual(['bad']);
    expect(poolsClosed).toBe(true);
  });

  it('abandons a stuck phase at the deadline so the pools still close', async () => {
    const lines: Array<{ msg: string; phase?: string }> = [];
    const logger = pino(
      { level: 'info' },
      { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string; phase?: string }) },
    );
    const lifecycle = createLifecycle({ logger, timeoutMs: 300 });
    let poolsClosed = false;
    lifecycle.onShutdown('close-connections', 'stuck', () => new Promise<void>(() => {}));
    lifecycle.onShutdown('close-pools', 'pools', () => {
      poolsClosed = true;
    });
    await lifecycle.shutdown();
    expect(poolsClosed).toBe(true);
    expect(lines.some((l) => l.msg.includes('timed out') && l.phase === 'close-connections')).toBe(true);
    expect(lines.filter((l) => l.msg === `shutdown phase ${l.phase}`).map((l) => l.phase)).toEqual([
      ...SHUTDOWN_PHASES,
    ]);
    expect(lines.at(-1)?.msg).toBe('shutdown complete');
  });
});
