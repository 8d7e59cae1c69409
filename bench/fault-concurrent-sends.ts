// Concurrent sends to one user: 2 real server processes (shared PostgreSQL, private redis-server), one user
// with --streams-per-instance SSE streams on each instance; --rounds rounds of --concurrent admin sends fired at
// once (send i of a round goes to instance i % 2), each round starting when the previous one's responses are
// in. Every live stream must receive every notification exactly once: per stream we count missing and
// duplicated notifications (by unique title) and logged-event ids (contiguity from the stream's first cursor
// to the user's final seq), and the latency from just before the send request to the receipt.
// Usage: npm run bench -- fault-concurrent-sends [--rounds 100] [--concurrent 20] [--streams-per-instance 2]
import { performance } from 'node:perf_hooks';
import { CLUSTER_ORIGIN } from '@herald/server/testkit';
import { audit, FaultClient, finalSeqs, setupFault, sleep } from './_fault.js';
import { numberArg, percentile, printTable } from './_lib.js';

const ROUNDS = numberArg('rounds', 100);
const CONCURRENT = numberArg('concurrent', 20);
const PER_INSTANCE = numberArg('streams-per-instance', 2);
const TIMEOUT_MS = numberArg('timeout-ms', 60_000);

async function main() {
  console.log('starting 2 instances (PostgreSQL + private redis-server)…');
  const setup = await setupFault({ instances: 2, users: 1, env: { SSE_KEEPALIVE_MS: '15000' } });
  const { cluster, db } = setup;
  const user = setup.users[0];
  if (!user) throw new Error('no user');
  const clients: FaultClient[] = [];
  try {
    for (let k = 0; k < PER_INSTANCE * 2; k++) clients.push(new FaultClient(user, k % 2, cluster, 60_000));
    await Promise.all(clients.map((c) => c.start()));
    const logFrom = [0, 1].map((i) => cluster.logs(i).length);
    const sentAt = new Map<string, number>();
    let failed = 0;
    const send = async (i: number, title: string) => {
      sentAt.set(title, performance.now());
      const res = await fetch(`${cluster.url(i % 2)}/admin/notifications/send`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie: setup.adminCookie },
        body: JSON.stringify({
          target: { scope: 'user', identifier: user.id },
          notification: { type: 'info', title, content: `concurrent send ${title}` },
        }),
      });
      await res.arrayBuffer();
      if (res.status !== 200) failed++;
    };
    console.log(
      `${clients.length} streams (${PER_INSTANCE} per instance); ${ROUNDS} rounds × ${CONCURRENT} concurrent sends…`,
    );
    const start = performance.now();
    for (let r = 0; r < ROUNDS; r++) {
      await Promise.all(Array.from({ length: CONCURRENT }, (_, i) => send(i, `r${r}-s${i}`)));
    }
    const sendMs = performance.now() - start;
    const total = ROUNDS * CONCURRENT;
    const finals = await finalSeqs(db, [user.id]);
    const final = finals.get(user.id) ?? 0;
    const deadline = performance.now() + TIMEOUT_MS;
    while (performance.now() < deadline && !clients.every((c) => c.maxId >= final)) await sleep(50);
    await sleep(1_000); // late duplicates would still be counted

    const audits = await audit(db, clients, finals);
    const rows = clients.map((c, k) => {
      const titles = new Map<string, number>();
      const latencies: number[] = [];
      for (const t of c.titles) {
        titles.set(t.title, (titles.get(t.title) ?? 0) + 1);
        const at = sentAt.get(t.title);
        if (at !== undefined && (titles.get(t.title) ?? 0) === 1) latencies.push(t.at - at);
      }
      latencies.sort((a, b) => a - b);
      let missing = 0;
      for (const title of sentAt.keys()) if (!titles.has(title)) missing++;
      let dups = 0;
      for (const n of titles.values()) if (n > 1) dups += n - 1;
      const a = audits[k];
      return {
        stream: `${k} (instance ${c.home})`,
        received: titles.size,
        'missing notifications': missing,
        'duplicated notifications': dups,
        'missing ids': a?.missing.length ?? 0,
        'duplicated ids': a?.duplicated ?? 0,
        'elided ids': a?.elided ?? 0,
        'out of order': c.outOfOrder,
        reconnects: c.connects - 1,
        'p50 ms': percentile(latencies, 50).toFixed(0),
        'p99 ms': percentile(latencies, 99).toFixed(0),
        'max ms': (latencies.at(-1) ?? Number.NaN).toFixed(0),
      };
    });
    console.log(
      `\nfault-concurrent-sends: 1 user, ${clients.length} streams on 2 instances, ${ROUNDS} rounds × ` +
        `${CONCURRENT} concurrent sends split across the instances = ${total} notifications ` +
        `(${failed} failed sends) in ${(sendMs / 1000).toFixed(1)} s (${(total / (sendMs / 1000)).toFixed(0)}/s); ` +
        `final seq ${final}; latency = send start → new_notification received`,
    );
    printTable(rows);
    for (const a of audits
      .filter((x) => x.missing.length || x.duplicated || x.client.outOfOrder)
      .slice(0, 2)) {
      console.log(
        `affected stream home ${a.client.home}: missing [${a.missing.slice(0, 20).join(', ')}], ids ${a.client.idLog.join(',')}`,
      );
    }
    for (const i of [0, 1]) {
      const lines = cluster.logs(i).slice(logFrom[i]);
      console.log(`instance ${i} log lines (warn+): ${lines.length}`);
      for (const line of lines.slice(0, 3)) console.log(`  ${line.slice(0, 300)}`);
    }
  } finally {
    for (const c of clients) c.stop();
    await setup.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
