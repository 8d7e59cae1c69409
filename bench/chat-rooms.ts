// Chat rooms at scale (issue 23): 3 instances (shared PostgreSQL, private redis-server), 10,000 private rooms of
// 2–20 members, 2,000 authenticated sockets each subscribed to 5–50 of its user's rooms, 200 messages/s sent to
// rooms picked at random. Every receiving socket parses what it gets: delivery latency (send → receipt), and
// per (socket, room) every seq from the room's head at subscribe time to its final `last_seq` must arrive exactly
// once (missing / duplicated). Also: bus messages published and received per chat message (the instances'
// /metrics), CPU per instance.
// Users, sessions, rooms and memberships are seeded in SQL (bench/_rooms.ts); sockets authenticate with those
// sessions through the real upgrade. Each room's owner is one of 50 sender users (≤ 200 rooms each, under
// CHAT_MAX_ROOMS_PER_USER); the other members are socket users. The senders' sockets follow no room: the server
// still answers each send with its `new_message`, which is how the benchmark learns that a message was stored.
// Usage: npm run bench -- chat-rooms [--rooms 10000] [--sockets 2000] [--rate 200] [--seconds 20]
//        [--instances 3] [--senders 50] [--min-subs 5] [--max-subs 50] [--seed 1]
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
  writtenBytesOfPort,
} from './_lib.js';
import {
  busCounters,
  connectRooms,
  type Frame,
  METRICS_KEY,
  openDb,
  pool,
  random,
  seedRooms,
  seedUsers,
  sleep,
  subscribeAll,
} from './_rooms.js';

const ROOMS = numberArg('rooms', 10_000);
const SOCKETS = numberArg('sockets', 2000);
const RATE = numberArg('rate', 200);
const SECONDS = numberArg('seconds', 20);
const INSTANCES = Math.max(1, numberArg('instances', 3));
const SENDERS = Math.max(1, numberArg('senders', 50));
const MIN_MEMBERS = 2;
const MAX_MEMBERS = 20;
const MIN_SUBS = numberArg('min-subs', 5);
const MAX_SUBS = numberArg('max-subs', 50);
const WARMUP_SECONDS = 3;
const rng = random(numberArg('seed', 1));
const between = (lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1));

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
      CHAT_MAX_CONNECTIONS_PER_IP: String(SOCKETS + SENDERS + 100),
      PRESENCE_DEBOUNCE_MS: '500',
      // The clients answer pings (ws does), but a ping round adds nothing to what is measured here.
      WS_PING_INTERVAL_MS: '600000',
      METRICS_API_KEY: METRICS_KEY,
    },
  });
  const db = await openDb(cluster);
  const sockets: WebSocket[] = [];
  const senders: WebSocket[] = [];
  try {
    const setupStart = performance.now();
    const users = await seedUsers(cluster, db, 'rs', SENDERS + SOCKETS);
    const senderIds = users.ids.slice(0, SENDERS);
    const socketUsers = users.ids.slice(SENDERS);
    // Each room: a sender as owner, then 1–19 distinct socket users.
    const memberLists: string[][] = [];
    for (let r = 0; r < ROOMS; r++) {
      const want = Math.min(between(MIN_MEMBERS, MAX_MEMBERS) - 1, socketUsers.length);
      const picked = new Set<number>();
      while (picked.size < want) picked.add(Math.floor(rng() * socketUsers.length));
      memberLists.push([senderIds[r % SENDERS] ?? '', ...[...picked].map((k) => socketUsers[k] ?? '')]);
    }
    const rooms = await seedRooms(db, 'private', memberLists);
    const roomsOfUser = new Map<string, string[]>();
    for (const room of rooms) {
      for (const u of room.members.slice(1)) {
        const list = roomsOfUser.get(u) ?? [];
        list.push(room.id);
        roomsOfUser.set(u, list);
      }
    }
    const ownerOf = new Map(rooms.map((r, k) => [r.id, k % SENDERS]));
    const seedSeconds = (performance.now() - setupStart) / 1000;

    // Connect and subscribe: socket j is socket user j, on instance j mod INSTANCES.
    const connectStart = performance.now();
    const subscriptions: Array<Map<string, number>> = new Array(SOCKETS);
    await pool(SOCKETS, 50, async (j) => {
      const ws = await connectRooms(cluster.port(j % INSTANCES), users.cookies[SENDERS + j] ?? '');
      sockets[j] = ws;
    });
    const connectSeconds = (performance.now() - connectStart) / 1000;
    const subscribeStart = performance.now();
    await pool(SOCKETS, 100, async (j) => {
      const mine = [...(roomsOfUser.get(socketUsers[j] ?? '') ?? [])];
      // A random subset of the user's rooms (Fisher–Yates prefix).
      const k = Math.min(between(MIN_SUBS, MAX_SUBS), mine.length);
      for (let i = 0; i < k; i++) {
        const swap = i + Math.floor(rng() * (mine.length - i));
        [mine[i], mine[swap]] = [mine[swap] as string, mine[i] as string];
      }
      subscriptions[j] = await subscribeAll(sockets[j] as WebSocket, mine.slice(0, k));
    });
    const subscribeSeconds = (performance.now() - subscribeStart) / 1000;
    const totalSubs = subscriptions.reduce((a, m) => a + m.size, 0);
    const followed = new Set(subscriptions.flatMap((m) => [...m.keys()]));

    // Receivers: every socket parses; counts per (socket, room, seq) and latency by clientMessageId.
    const sentAt: number[] = [];
    let measuring = false;
    const latencies: number[] = [];
    const received = new Map<string, number>();
    const unexpected = new Map<string, number>();
    sockets.forEach((ws, j) => {
      ws.on('message', (data) => {
        const now = performance.now();
        const f = JSON.parse(String(data)) as Frame;
        if (f.type === 'new_message' && f.message) {
          const key = `${j}|${f.message.roomId}|${f.message.seq}`;
          received.set(key, (received.get(key) ?? 0) + 1);
          const t = sentAt[Number(f.message.clientMessageId?.slice(2))];
          if (measuring && t !== undefined) latencies.push(now - t);
        } else if (f.type !== 'presence' && f.type !== 'typing') {
          unexpected.set(f.type, (unexpected.get(f.type) ?? 0) + 1);
        }
      });
    });

    await pool(SENDERS, 10, async (s) => {
      senders[s] = await connectRooms(cluster.port(s % INSTANCES), users.cookies[s] ?? '');
    });
    let stored = 0;
    const senderErrors = new Map<string, number>();
    for (const ws of senders) {
      ws.on('message', (data) => {
        const f = JSON.parse(String(data)) as Frame;
        if (f.type === 'new_message' && f.message?.clientMessageId?.startsWith('r-')) stored++;
        else if (f.type === 'error' || f.type === 'throttled')
          senderErrors.set(f.code ?? f.type, (senderErrors.get(f.code ?? f.type) ?? 0) + 1);
      });
    }
    console.log(
      `seeded ${SENDERS + SOCKETS} users + sessions, ${ROOMS} rooms (${memberLists.reduce((a, m) => a + m.length, 0)} memberships) in ${seedSeconds.toFixed(1)} s; ` +
        `${SOCKETS} sockets connected in ${connectSeconds.toFixed(1)} s, ${totalSubs} subscriptions (${followed.size} rooms followed) in ${subscribeSeconds.toFixed(1)} s; ` +
        `sending ${RATE} msg/s…`,
    );
    await sleep(2000);

    const ports = Array.from({ length: INSTANCES }, (_, k) => cluster.port(k));
    const busBefore = await Promise.all(ports.map((_, k) => busCounters(cluster, k)));
    const cpuBefore = ports.map(cpuSecondsOfPort);
    const wcharBefore = ports.map(writtenBytesOfPort);
    const ownBefore = process.cpuUsage();
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    const roomIds = rooms.map((r) => r.id);
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
          const roomId = roomIds[Math.floor(rng() * roomIds.length)] ?? '';
          sentAt[id] = performance.now();
          senders[ownerOf.get(roomId) ?? 0]?.send(
            JSON.stringify({
              type: 'send_message',
              roomId,
              message: `room bench ${id}`,
              clientMessageId: `r-${id}`,
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
    // Every send answered (stored or refused), then a moment for the last fan-out.
    const answered = () => stored + [...senderErrors.values()].reduce((a, b) => a + b, 0);
    for (let waited = 0; answered() < total && waited < 30_000; waited += 100) await sleep(100);
    await sleep(2000);
    measuring = false;
    loopDelay.disable();
    const busAfter = await Promise.all(ports.map((_, k) => busCounters(cluster, k)));
    const wcharUsed = ports.map((p, k) => writtenBytesOfPort(p) - (wcharBefore[k] ?? Number.NaN));

    const { rows } = await db.query<{ id: string; last_seq: string }>(
      'select id, last_seq from chat_room where id = any($1::text[])',
      [[...followed]],
    );
    const finalSeq = new Map(rows.map((r) => [r.id, Number(r.last_seq)]));
    let expected = 0;
    let missing = 0;
    let duplicates = 0;
    subscriptions.forEach((heads, j) => {
      for (const [roomId, head] of heads) {
        const last = finalSeq.get(roomId) ?? head;
        for (let seq = 1; seq <= last; seq++) {
          const c = received.get(`${j}|${roomId}|${seq}`) ?? 0;
          if (seq <= head) {
            // Sent before this socket subscribed: must not arrive live.
            duplicates += c;
            continue;
          }
          expected++;
          if (c === 0) missing++;
          if (c > 1) duplicates += c - 1;
        }
      }
    });
    const published = busAfter.reduce((a, b, k) => a + b.published - (busBefore[k]?.published ?? 0), 0);
    const busReceived = busAfter.reduce((a, b, k) => a + b.received - (busBefore[k]?.received ?? 0), 0);
    latencies.sort((a, b) => a - b);
    const share = (s: number) => `${((s / sendingSeconds) * 100).toFixed(0)} %`;
    console.log(
      `\n${INSTANCES} instances, ${ROOMS} rooms of ${MIN_MEMBERS}–${MAX_MEMBERS} members, ${SOCKETS} sockets ` +
        `(${MIN_SUBS}–${MAX_SUBS} rooms each, ${totalSubs} subscriptions), ${RATE} msg/s to random rooms for ${SECONDS} s ` +
        `after ${WARMUP_SECONDS} s warm-up (${total} sent, ${stored} stored${senderErrors.size ? `, refused: ${JSON.stringify(Object.fromEntries(senderErrors))}` : ''})`,
    );
    printTable([
      {
        deliveries: expected,
        'latency samples': latencies.length,
        'p50 ms': percentile(latencies, 50).toFixed(1),
        'p99 ms': percentile(latencies, 99).toFixed(1),
        'max ms': (latencies.at(-1) ?? Number.NaN).toFixed(1),
        missing,
        duplicates,
        'bus pub/msg': (published / Math.max(1, stored)).toFixed(2),
        'bus recv/msg': (busReceived / Math.max(1, stored)).toFixed(2),
      },
    ]);
    console.log(
      `CPU while sending (${sendingSeconds.toFixed(1)} s; 200 % = both cores): ${cpuUsed
        .map((c, k) => `instance ${k} ${share(c)}`)
        .join(', ')}, bench process ${share((own.user + own.system) / 1e6)}`,
    );
    console.log(
      `bytes written per stored message (all instances, sockets + database + store): ${(
        wcharUsed.reduce((a, b) => a + b, 0) / Math.max(1, stored)
      ).toFixed(
        0,
      )} B; other frames received by room sockets: ${JSON.stringify(Object.fromEntries(unexpected))}`,
    );
    console.log(
      `bench event-loop delay: p50 ${(loopDelay.percentile(50) / 1e6).toFixed(1)} ms, p99 ${(loopDelay.percentile(99) / 1e6).toFixed(1)} ms; ${machineLoad()}`,
    );
  } finally {
    for (const ws of [...sockets, ...senders]) ws?.terminate();
    await db.end();
    await cluster.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
