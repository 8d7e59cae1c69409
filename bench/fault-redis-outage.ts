// Delivery through a Redis outage: 3 real server processes (shared PostgreSQL, private redis-server), U users
// × D devices = U·D SSE streams (device k of user u homed on instance (u + k) % 3, so every user has a stream on
// every instance), a steady mixed load (admin creates, read/unread toggles, deletes) on random instances. After
// --warmup s the private Redis is killed (SIGKILL) for --outage s and started again (empty); the load goes on
// for --after s, then stops, and we wait for every stream to reach its user's final seq. Each device whose
// stream ends reconnects with Last-Event-ID (home first, then the other instances, 100 ms–1 s backoff).
// Reports missing / duplicated logged events per client, resyncs, convergence times and a model check.
// Usage: npm run bench -- fault-redis-outage [--users 100] [--devices 3] [--rate 30] [--warmup 10]
//        [--outage 10] [--after 10] [--sample 20] [--keepalive-ms 5000]
import { performance } from 'node:perf_hooks';
import { finalSeqs, fmtMs, runScenario, scenarioArgs } from './_fault.js';
import { numberArg } from './_lib.js';

const OUTAGE_S = numberArg('outage', 10);

runScenario(scenarioArgs(), `Redis SIGKILLed ${OUTAGE_S} s`, async ({ setup, userIds }) => {
  const { cluster, db } = setup;
  await cluster.redis.stop('SIGKILL');
  const downAt = performance.now();
  const degraded = await Promise.all(
    [0, 1, 2].map((i) => cluster.waitForHealth(i, 'degraded', 20_000).then(() => performance.now() - downAt)),
  );
  await new Promise((r) => setTimeout(r, Math.max(0, OUTAGE_S * 1000 - (performance.now() - downAt))));
  await cluster.redis.start();
  const upAt = performance.now();
  // The backlog of the outage: everything committed up to the restart.
  const atRestart = await finalSeqs(db, userIds);
  const healthy = await Promise.all(
    [0, 1, 2].map((i) => cluster.waitForHealth(i, 'ok', 30_000).then(() => performance.now() - upAt)),
  );
  console.log(`Redis back after ${((upAt - downAt) / 1000).toFixed(1)} s; load continues…`);
  return {
    endedAt: upAt,
    title: 'fault-redis-outage',
    timings: ({ finalAt, loadStoppedAt, reached }) => ({
      'instances degraded after (max)': fmtMs(Math.max(...degraded)),
      'instances ok after restart (max)': fmtMs(Math.max(...healthy)),
      'restart → outage backlog delivered to all': fmtMs(reached(atRestart) - upAt),
      'restart → every client at final seq': fmtMs(finalAt - upAt),
      'load stop → every client at final seq': fmtMs(Math.max(0, finalAt - loadStoppedAt)),
    }),
  };
}).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
