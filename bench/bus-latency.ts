// Bus latency over loopback Redis: two Redis bus instances (each with its own three connections, as two server
// processes would have) on a private redis-server; instance A publishes at a fixed rate, instance B measures
// the time from publish call to handler. Also reports the bus's own figures (receive time − sentAt, the ones
// /metrics shows, millisecond resolution). Prints a table.
// --cluster: the same on a private Redis Cluster (3 masters + 3 replicas, sharded pub/sub).
// Usage: npm run bench -- bus-latency [--rate 1000] [--seconds 10] [--bytes 200] [--cluster]
import { performance } from 'node:perf_hooks';
import { startRedisCluster, startRedisServer } from '@herald/server/testkit';
import { pino } from 'pino';
import { createStore } from '../server/src/infra/store.js';
import { realtimeKeys } from '../server/src/realtime/keys.js';
import { createRedisBus } from '../server/src/realtime/redis-bus.js';
import { flagArg, numberArg, percentile, printTable } from './_lib.js';

const RATE = numberArg('rate', 1000);
const SECONDS = numberArg('seconds', 10);
const BYTES = numberArg('bytes', 200);
const WARMUP = Math.min(RATE, 200);
const CLUSTER = flagArg('cluster');

async function main(): Promise<void> {
  const redis = CLUSTER ? await startRedisCluster() : await startRedisServer();
  const logger = pino({ level: 'warn' });
  const prefix = 'bench:';
  const make = (instanceId: string) => {
    const store = createStore({ url: redis.url, cluster: CLUSTER, prefix });
    const conns = store.redis;
    if (!conns) throw new Error('expected a Redis store');
    const bus = createRedisBus({
      instanceId,
      pub: conns.pub,
      sub: conns.sub,
      watch: [conns.data],
      channel: realtimeKeys(prefix, { cluster: CLUSTER }).channel,
      sharded: CLUSTER,
      maxPayloadBytes: 256 * 1024,
      dedupWindowMs: 5_000,
      logger,
    });
    return { store, bus };
  };
  const a = make('bench-a');
  const b = make('bench-b');
  await Promise.all([a.bus.start(), b.bus.start()]);

  const latencies: number[] = [];
  let received = 0;
  let measuring = false;
  b.bus.subscribe<{ t: number; pad: string }>('bench.msg', (payload) => {
    received++;
    if (measuring) latencies.push(performance.now() - payload.t);
  });
  const pad = 'x'.repeat(Math.max(0, BYTES - 40));

  // Warm-up (connections, JIT), not measured.
  for (let i = 0; i < WARMUP; i++) await a.bus.publish('bench.msg', { t: performance.now(), pad });
  while (received < WARMUP) await new Promise((resolve) => setTimeout(resolve, 5));

  const statsBefore = b.bus.stats();
  measuring = true;
  const total = RATE * SECONDS;
  const started = performance.now();
  let sent = 0;
  // Paced in 1 ms ticks: send whatever the schedule says is due, so the rate holds despite timer jitter.
  await new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * RATE));
      while (sent < due) {
        sent++;
        a.bus.publish('bench.msg', { t: performance.now(), pad }).catch(() => {});
      }
      if (sent >= total) resolve();
      else setTimeout(tick, 1);
    };
    tick();
  });
  const sendSeconds = (performance.now() - started) / 1000;
  const deadline = Date.now() + 10_000;
  while (latencies.length < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  const after = b.bus.stats();

  const sorted = [...latencies].sort((x, y) => x - y);
  const avg = sorted.reduce((s, v) => s + v, 0) / Math.max(1, sorted.length);
  const busCount = after.latencyCount - statsBefore.latencyCount;
  const busAvg = busCount > 0 ? (after.latencySumMs - statsBefore.latencySumMs) / busCount : Number.NaN;
  const f = (n: number) => n.toFixed(3);
  console.log(
    `\nBus latency over loopback ${CLUSTER ? 'Redis Cluster (3 masters, sharded pub/sub)' : 'Redis'}, payload ~${BYTES} B`,
  );
  printTable([
    {
      'target msg/s': RATE,
      'achieved msg/s': Math.round(sent / sendSeconds),
      sent,
      delivered: sorted.length,
      'avg ms': f(avg),
      'p50 ms': f(percentile(sorted, 50)),
      'p99 ms': f(percentile(sorted, 99)),
      'max ms': f(sorted.at(-1) ?? Number.NaN),
      'bus avg ms (sentAt)': f(busAvg),
      'bus max ms (sentAt, lifetime)': after.maxLatencyMs,
      'publish failures': a.bus.stats().publishFailures,
    },
  ]);

  for (const x of [a, b]) {
    await x.bus.close();
    await x.store.close();
  }
  await redis.close();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
