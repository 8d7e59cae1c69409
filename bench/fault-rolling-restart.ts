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
import { fmtMs, runScenario, scenarioArgs, sleep } from './_fault.js';
import { numberArg } from './_lib.js';

const GAP_S = numberArg('gap', 5);

runScenario(
  scenarioArgs(),
  `SIGTERM + start of each instance in turn (${GAP_S} s apart)`,
  async ({ setup }) => {
    const { cluster } = setup;
    const restarts: string[] = [];
    const rollStart = performance.now();
    for (let i = 0; i < cluster.size; i++) {
      const t0 = performance.now();
      const exit = await cluster.kill(i, 'SIGTERM');
      const t1 = performance.now();
      // cluster.start waits for health for a bounded time; a start on a busy 2-core machine can take longer.
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
    return {
      endedAt: lastUpAt,
      title: 'fault-rolling-restart',
      timings: ({ finalAt, loadStoppedAt }) => ({
        'rolling restart duration': fmtMs(lastUpAt - rollStart),
        'last instance up → every client at final seq': fmtMs(finalAt - lastUpAt),
        'load stop → every client at final seq': fmtMs(Math.max(0, finalAt - loadStoppedAt)),
      }),
    };
  },
).catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
