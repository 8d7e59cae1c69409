// Delivery through a rolling restart: the setup of fault-redis-outage (3 real server processes, U users × D
// devices, steady mixed load on random instances), but instead of a store outage every instance in turn gets
// SIGTERM, is waited for until it exits, and is started again on the same port (--gap s between instances).
// Streams of the stopping instance end with `error SHUTTING_DOWN`; each device reconnects with Last-Event-ID
// (home first, then the other instances, 100 ms–1 s backoff). Load requests refused by a stopping instance
// are retried on another one (sends carry an Idempotency-Key). After the last restart the load goes on for
// --after s, stops, and we wait for every stream to reach its user's final seq.
// Usage: npm run bench -- fault-rolling-restart [--users 100] [--devices 3] [--rate 30] [--warmup 10]
//        [--gap 5] [--after 10] [--sample 20] [--keepalive-ms 5000]
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
const GAP_S = numberArg('gap', 5);
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
      `${clients.length} streams open; load ${RATE} ops/s for ${WARMUP_S} s, then the rolling restart…`,
    );
    const load = startLoad({ setup, clientsByUser: opened.byUser, rate: RATE, concurrency: CONCURRENCY });
    await sleep(WARMUP_S * 1000);

    const restarts: string[] = [];
    const rollStart = performance.now();
    for (let i = 0; i < cluster.size; i++) {
      const t0 = performance.now();
      const exit = await cluster.kill(i, 'SIGTERM');
      const t1 = performance.now();
      // cluster.start waits 30 s for health; a start on a busy 2-core machine can take longer.
      await cluster.start(i).catch(async (err: unknown) => {
        if (cluster.isRunning(i)) return void (await cluster.waitForHealth(i, 'ok', 120_000));
        console.error(`instance ${i} did not come back; its last log lines:`);
        for (const line of cluster.logs(i).slice(-15)) console.error(`  ${line.slice(0, 400)}`);
        throw err;
      });
      const t2 = performance.now();
      restarts.push(
        `instance ${i}: exit ${exit.code ?? exit.signal} after ${fmtMs(t1 - t0)}, healthy ${fmtMs(t2 - t1)} later`,
      );
      if (i < cluster.size - 1) await sleep(GAP_S * 1000);
    }
    const lastUpAt = performance.now();
    console.log(`rolling restart done in ${fmtMs(lastUpAt - rollStart)}:\n  ${restarts.join('\n  ')}`);
    await sleep(AFTER_S * 1000);
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
    const finalAt = clients.reduce(
      (m, c) => Math.max(m, c.reachedAt(finals.get(c.user.id) ?? 0)),
      Number.NEGATIVE_INFINITY,
    );

    const audits = await audit(db, clients, finals);
    const models = await checkModels(setup, opened.byUser, SAMPLE);
    let logged = 0;
    for (const id of userIds) logged += (finals.get(id) ?? 0) - (initial.get(id) ?? 0);
    report({
      title:
        `fault-rolling-restart: 3 instances, ${USERS} users × ${DEVICES} devices, ${RATE} ops/s, ` +
        `SIGTERM + start of each instance in turn (${GAP_S} s apart; warmup ${WARMUP_S} s, ${AFTER_S} s after)`,
      audits,
      load: load.stats,
      loggedEvents: logged,
      timings: {
        'rolling restart duration': fmtMs(lastUpAt - rollStart),
        'last instance up → every client at final seq': fmtMs(finalAt - lastUpAt),
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
