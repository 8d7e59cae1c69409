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
import {
  audit,
  checkModels,
  finalSeqs,
  fmtMs,
  openClients,
  report,
  setupFault,
  sleep,
  startLoad,
} from './_fault.js';
import { numberArg } from './_lib.js';

const USERS = numberArg('users', 100);
const DEVICES = numberArg('devices', 3);
const RATE = numberArg('rate', 30);
const CONCURRENCY = numberArg('concurrency', 16);
const WARMUP_S = numberArg('warmup', 10);
const OUTAGE_S = numberArg('outage', 10);
const AFTER_S = numberArg('after', 10);
const SAMPLE = numberArg('sample', 20);
const KEEPALIVE_MS = numberArg('keepalive-ms', 5000);
const CONVERGE_TIMEOUT_MS = numberArg('converge-timeout-ms', 60_000);

async function main() {
  console.log(`starting 3 instances (PostgreSQL + private redis-server), ${USERS} users…`);
  const setup = await setupFault({
    instances: 3,
    users: USERS,
    env: { SSE_KEEPALIVE_MS: String(KEEPALIVE_MS) },
  });
  const { cluster, db } = setup;
  let clients: Awaited<ReturnType<typeof openClients>>['clients'] = [];
  try {
    const userIds = setup.users.map((u) => u.id);
    const initial = await finalSeqs(db, userIds);
    const opened = await openClients(setup, DEVICES, KEEPALIVE_MS * 3 + 2_000);
    clients = opened.clients;
    const logFrom = [0, 1, 2].map((i) => cluster.logs(i).length);
    console.log(
      `${clients.length} streams open; load ${RATE} ops/s for ${WARMUP_S} s, then Redis down ${OUTAGE_S} s…`,
    );
    const load = startLoad({ setup, clientsByUser: opened.byUser, rate: RATE, concurrency: CONCURRENCY });
    await sleep(WARMUP_S * 1000);

    await cluster.redis.stop('SIGKILL');
    const downAt = performance.now();
    const degraded = await Promise.all(
      [0, 1, 2].map((i) =>
        cluster.waitForHealth(i, 'degraded', 20_000).then(() => performance.now() - downAt),
      ),
    );
    await sleep(Math.max(0, OUTAGE_S * 1000 - (performance.now() - downAt)));
    await cluster.redis.start();
    const upAt = performance.now();
    // The backlog of the outage: everything committed up to the restart.
    const atRestart = await finalSeqs(db, userIds);
    const healthy = await Promise.all(
      [0, 1, 2].map((i) => cluster.waitForHealth(i, 'ok', 30_000).then(() => performance.now() - upAt)),
    );
    console.log(`Redis back after ${((upAt - downAt) / 1000).toFixed(1)} s; load continues ${AFTER_S} s…`);
    await sleep(Math.max(0, AFTER_S * 1000 - (performance.now() - upAt)));
    await load.stop();
    const loadStoppedAt = performance.now();

    const finals = await finalSeqs(db, userIds);
    const deadline = performance.now() + CONVERGE_TIMEOUT_MS;
    let converged = false;
    while (performance.now() < deadline) {
      if (clients.every((c) => c.live && c.maxId >= (finals.get(c.user.id) ?? 0))) {
        converged = true;
        break;
      }
      await sleep(100);
    }
    await sleep(1_000); // late duplicates would still be counted
    const maxOf = (f: (c: (typeof clients)[number]) => number) =>
      clients.reduce((m, c) => Math.max(m, f(c)), Number.NEGATIVE_INFINITY);
    const backlogMs = maxOf((c) => c.reachedAt(atRestart.get(c.user.id) ?? 0)) - upAt;
    const finalAt = maxOf((c) => c.reachedAt(finals.get(c.user.id) ?? 0));

    const audits = await audit(db, clients, finals);
    const models = await checkModels(setup, opened.byUser, SAMPLE);
    let logged = 0;
    for (const id of userIds) logged += (finals.get(id) ?? 0) - (initial.get(id) ?? 0);
    report({
      title:
        `fault-redis-outage: 3 instances, ${USERS} users × ${DEVICES} devices, ${RATE} ops/s, ` +
        `Redis SIGKILLed ${OUTAGE_S} s (warmup ${WARMUP_S} s, ${AFTER_S} s after)`,
      audits,
      load: load.stats,
      loggedEvents: logged,
      timings: {
        'instances degraded after (max)': fmtMs(Math.max(...degraded)),
        'instances ok after restart (max)': fmtMs(Math.max(...healthy)),
        'restart → outage backlog delivered to all': fmtMs(backlogMs),
        'restart → every client at final seq': fmtMs(finalAt - upAt),
        'load stop → every client at final seq': fmtMs(Math.max(0, finalAt - loadStoppedAt)),
      },
      models,
      converged,
      cluster,
      logFrom,
    });
  } finally {
    for (const c of clients) c.stop();
    await setup.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
