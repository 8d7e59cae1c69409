// One big room (issue 23): a public room with 5,000 members, each with one socket subscribed to it, spread over 3
// instances (shared PostgreSQL, private redis-server); 20 messages/s sent to it by 50 members (0.4 each: one socket's requests run one after another, so a few fast senders would measure their own queue). Delivery latency
// and missing/duplicated seqs on parsed observer sockets (30 per instance); the other sockets subscribe and then
// only count bytes on a worker thread (bench/_rooms.ts SubscriberPool), so the load generator does not parse
// 100,000 frames/s on the cores the instances need. Bytes written per message: what the instances passed to
// write()/writev() (sockets, database, store; /proc/<pid>/io wchar) divided by the messages stored, and the bytes
// one subscriber received per message.
// Usage: npm run bench -- chat-big-room [--members 5000] [--rate 20] [--seconds 20] [--instances 3]
//        [--observers 30] [--senders 50]
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { startCluster } from '@herald/server/testkit';
import type WebSocket from 'ws';
import {
  cpuSecondsOfPort,
  machineLoad,
  numberArg,
  ONE_ADDRESS_LIMITS,
  PRODUCTION_LIVENESS,
  percentile,
  printTable,
  rssOfPort,
  writtenBytesOfPort,
} from './_lib.js';
import {
  busCounters,
  connectRooms,
  describeStages,
  type Frame,
  METRICS_KEY,
  openDb,
  pool,
  readStages,
  SubscriberPool,
  type SubscriberSpec,
  seedRooms,
  seedUsers,
  sleep,
  subscribeAll,
} from './_rooms.js';

const MEMBERS = numberArg('members', 5000);
const RATE = numberArg('rate', 20);
const SECONDS = numberArg('seconds', 20);
const INSTANCES = Math.max(1, numberArg('instances', 3));
const OBSERVERS = numberArg('observers', 30);
const SENDERS = Math.max(1, numberArg('senders', 50));
const WARMUP_SECONDS = 3;

async function main() {
  console.log(`starting ${INSTANCES} instances (PostgreSQL + private redis-server)…; ${machineLoad()}`);
  const cluster = await startCluster({
    instances: INSTANCES,
    redis: 'private',
    env: {
      ...ONE_ADDRESS_LIMITS,
      ...PRODUCTION_LIVENESS,
      LOG_LEVEL: 'warn',
      CHAT_THROTTLE_LIMIT: '1000000',
      CHAT_FRAME_LIMIT: '1000000',
      CHAT_MAX_CONNECTIONS_PER_IP: String(MEMBERS + SENDERS + 100),
      PRESENCE_DEBOUNCE_MS: '500',
      // The discarding subscribers cannot answer pings: keep the first ping round beyond the run.
      WS_PING_INTERVAL_MS: '600000',
      METRICS_API_KEY: METRICS_KEY,
    },
  });
  const db = await openDb(cluster);
  const observers: WebSocket[] = [];
  const senders: WebSocket[] = [];
  const quiet = new SubscriberPool();
  try {
    const users = await seedUsers(cluster, db, 'br', MEMBERS);
    const [room] = await seedRooms(db, 'public', [users.ids]);
    if (!room) throw new Error('no room seeded');
    const ports = Array.from({ length: INSTANCES }, (_, k) => cluster.port(k));
    const rssBefore = ports.map(rssOfPort);

    // Member j's socket lives on instance j mod INSTANCES; the first OBSERVERS of each instance parse.
    const observerIdx: number[] = [];
    const quietSpecs: SubscriberSpec[] = [];
    const perInstanceObserved = new Array<number>(INSTANCES).fill(0);
    for (let j = 0; j < MEMBERS; j++) {
      const k = j % INSTANCES;
      if ((perInstanceObserved[k] ?? 0) < OBSERVERS) {
        perInstanceObserved[k] = (perInstanceObserved[k] ?? 0) + 1;
        observerIdx.push(j);
      } else quietSpecs.push({ port: cluster.port(k), cookie: users.cookies[j] ?? '', roomIds: [room.id] });
    }
    const connectStart = performance.now();
    await pool(observerIdx.length, 20, async (i) => {
      const j = observerIdx[i] ?? 0;
      const ws = await connectRooms(cluster.port(j % INSTANCES), users.cookies[j] ?? '');
      await subscribeAll(ws, [room.id]);
      observers[i] = ws;
    });
    await quiet.open(quietSpecs);
    const connectSeconds = (performance.now() - connectStart) / 1000;
    await pool(SENDERS, 10, async (s) => {
      senders[s] = await connectRooms(cluster.port(s % INSTANCES), users.cookies[s] ?? '');
    });
    // Presence frames of the joins settle (debounced) before anything is measured.
    await sleep(3000);
    const rssAfter = ports.map(rssOfPort);

    const sentAt: number[] = [];
    let measuring = false;
    const latencies: number[] = [];
    const seen = observers.map(() => new Map<number, number>());
    let frameBytes = 0;
    let frames = 0;
    observers.forEach((ws, i) => {
      ws.on('message', (data) => {
        const now = performance.now();
        const text = String(data);
        const f = JSON.parse(text) as Frame;
        if (f.type !== 'new_message' || !f.message) return;
        frameBytes += Buffer.byteLength(text);
        frames++;
        const m = seen[i] as Map<number, number>;
        m.set(f.message.seq, (m.get(f.message.seq) ?? 0) + 1);
        const t = sentAt[Number(f.message.clientMessageId?.slice(2))];
        if (measuring && t !== undefined) latencies.push(now - t);
      });
    });
    let stored = 0;
    let refused = 0;
    const refusals = new Map<string, number>();
    for (const ws of senders) {
      ws.on('message', (data) => {
        const f = JSON.parse(String(data)) as Frame;
        if (f.type === 'new_message' && f.message?.clientMessageId?.startsWith('b-')) stored++;
        else if (f.type === 'error' || f.type === 'throttled') {
          refused++;
          refusals.set(f.code ?? f.type, (refusals.get(f.code ?? f.type) ?? 0) + 1);
        }
      });
    }
    console.log(
      `${MEMBERS} members subscribed (${observers.length} parsed, ${quietSpecs.length} discarding on a worker thread) in ${connectSeconds.toFixed(1)} s; sending ${RATE} msg/s…`,
    );

    const stagesBefore = await readStages(cluster, INSTANCES);
    const busBefore = await Promise.all(ports.map((_, k) => busCounters(cluster, k)));
    const cpuBefore = ports.map(cpuSecondsOfPort);
    const wcharBefore = ports.map(writtenBytesOfPort);
    const quietBefore = await quiet.bytes();
    const ownBefore = process.cpuUsage();
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    const total = RATE * (WARMUP_SECONDS + SECONDS);
    const intervalMs = 1000 / RATE;
    let n = 0;
    const start = performance.now();
    await new Promise<void>((resolve) => {
      const tick = () => {
        const due = Math.min(total, Math.floor((performance.now() - start) / intervalMs) + 1);
        while (n < due) {
          if (!measuring && n >= RATE * WARMUP_SECONDS) measuring = true;
          const id = n++;
          sentAt[id] = performance.now();
          senders[id % SENDERS]?.send(
            JSON.stringify({
              type: 'send_message',
              roomId: room.id,
              message: `big room bench message ${id}`,
              clientMessageId: `b-${id}`,
            }),
          );
        }
        if (n >= total) return resolve();
        setTimeout(tick, Math.max(1, intervalMs / 2));
      };
      tick();
    });
    const sendingSeconds = (performance.now() - start) / 1000;
    const cpuUsed = ports.map((p, k) => cpuSecondsOfPort(p) - (cpuBefore[k] ?? Number.NaN));
    const own = process.cpuUsage(ownBefore);
    for (let waited = 0; stored + refused < total && waited < 30_000; waited += 100) await sleep(100);
    await sleep(2000);
    measuring = false;
    loopDelay.disable();
    const busAfter = await Promise.all(ports.map((_, k) => busCounters(cluster, k)));
    const stagesAfter = await readStages(cluster, INSTANCES);
    const wcharUsed = ports.map((p, k) => writtenBytesOfPort(p) - (wcharBefore[k] ?? Number.NaN));
    const quietBytes = (await quiet.bytes()) - quietBefore;

    const { rows } = await db.query<{ last_seq: string }>('select last_seq from chat_room where id = $1', [
      room.id,
    ]);
    const last = Number(rows[0]?.last_seq ?? 0);
    let missing = 0;
    let duplicates = 0;
    for (const m of seen) {
      for (let seq = 1; seq <= last; seq++) {
        const c = m.get(seq) ?? 0;
        if (c === 0) missing++;
        if (c > 1) duplicates += c - 1;
      }
    }
    latencies.sort((a, b) => a - b);
    const published = busAfter.reduce((a, b, k) => a + b.published - (busBefore[k]?.published ?? 0), 0);
    const busReceived = busAfter.reduce((a, b, k) => a + b.received - (busBefore[k]?.received ?? 0), 0);
    const written = wcharUsed.reduce((a, b) => a + b, 0);
    const share = (s: number) => `${((s / sendingSeconds) * 100).toFixed(0)} %`;
    console.log(
      `\none public room, ${MEMBERS} members each with one subscribed socket over ${INSTANCES} instances, ${RATE} msg/s ` +
        `for ${SECONDS} s after ${WARMUP_SECONDS} s warm-up (${total} sent, ${stored} stored, ${refused} refused${refused ? ` ${JSON.stringify(Object.fromEntries(refusals))}` : ''})`,
    );
    printTable([
      {
        'latency samples': latencies.length,
        'p50 ms': percentile(latencies, 50).toFixed(1),
        'p99 ms': percentile(latencies, 99).toFixed(1),
        'max ms': (latencies.at(-1) ?? Number.NaN).toFixed(1),
        missing,
        duplicates,
        'written B/msg (all instances)': (written / Math.max(1, stored)).toFixed(0),
        'per socket B/msg': (written / Math.max(1, stored) / MEMBERS).toFixed(0),
        'received B/msg/socket': (quietBytes / Math.max(1, stored) / Math.max(1, quietSpecs.length)).toFixed(
          0,
        ),
        'frame payload B': (frameBytes / Math.max(1, frames)).toFixed(0),
      },
    ]);
    console.log(
      `CPU while sending (${sendingSeconds.toFixed(1)} s; 200 % = both cores): ${cpuUsed
        .map((c, k) => `instance ${k} ${share(c)}`)
        .join(', ')}, bench process ${share((own.user + own.system) / 1e6)}; bus per message: ${(
        published / Math.max(1, stored)
      ).toFixed(2)} published, ${(busReceived / Math.max(1, stored)).toFixed(2)} received`,
    );
    console.log(
      `server RSS growth per subscribed socket: ${ports
        .map(
          (_, k) =>
            `instance ${k} ${(((rssAfter[k] ?? 0) - (rssBefore[k] ?? 0)) / Math.ceil(MEMBERS / INSTANCES)).toFixed(1)} KiB`,
        )
        .join(
          ', ',
        )}\nserver stages, mean over the run (all instances): ${describeStages(stagesBefore, stagesAfter)}\nbench event-loop delay p99 ${(loopDelay.percentile(99) / 1e6).toFixed(1)} ms; ${machineLoad()}`,
    );
  } finally {
    for (const ws of [...observers, ...senders]) ws?.terminate();
    await quiet.close();
    await db.end();
    await cluster.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
