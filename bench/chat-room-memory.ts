// Memory per room subscription (issue 23; goal ≤ 200 bytes beyond the socket): one instance (PostgreSQL, private
// redis-server), N authenticated sockets (one user each, seeded in SQL), then every socket subscribed to k private
// rooms it is a member of, k stepping up (1, 10, 50 by default). Rooms are laid out so that every room is followed
// from k = 1 on (socket i follows rooms i, i+1, …, i+k−1 mod N): the steps add subscriptions, not rooms, and the
// slope between the first and the last step is the cost of one subscription.
// Two kinds of reading. Without forced GC (production does not force one): RSS (median of 5 readings, 1 s apart)
// and V8 heap in use (the lowest of those readings, and their median). An idle instance allocates little, so a
// collection may not come for minutes and those heap figures carry garbage of the last step; hence also after a
// full collection forced through the instance's inspector (HeapProfiler.collectGarbage over the DevTools
// protocol, no change to the server): heap in use then is what the subscriptions retain.
// Usage: npm run bench -- chat-room-memory [--sockets 2000] [--steps 1,10,50]
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { startCluster } from '@herald/server/testkit';
import WebSocket from 'ws';
import {
  machineLoad,
  numberArg,
  ONE_ADDRESS_LIMITS,
  PRODUCTION_LIVENESS,
  printTable,
  rssOfPort,
  stringArg,
} from './_lib.js';
import {
  connectRooms,
  METRICS_KEY,
  openDb,
  pool,
  promValue,
  seedRooms,
  seedUsers,
  sleep,
  subscribeAll,
} from './_rooms.js';

const SOCKETS = numberArg('sockets', 2000);
const STEPS = stringArg('steps', '1,10,50')
  .split(',')
  .map(Number)
  .filter((k) => Number.isInteger(k) && k > 0)
  .sort((a, b) => a - b);
const K_MAX = STEPS.at(-1) ?? 1;

interface Reading {
  rssKiB: number;
  heapFloor: number;
  heapMedian: number;
  /** After a forced full collection. */
  gcHeap: number;
  gcRssKiB: number;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** A DevTools-protocol session with the instance's inspector. */
interface DevTools {
  call(method: string): Promise<Record<string, number>>;
  close(): void;
}

async function inspector(port: number): Promise<DevTools> {
  const [target] = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{
    webSocketDebuggerUrl: string;
  }>;
  if (!target) throw new Error('no inspector target');
  const ws = new WebSocket(target.webSocketDebuggerUrl, { perMessageDeflate: false });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  let id = 0;
  const waiting = new Map<number, (result: Record<string, number>) => void>();
  ws.on('message', (data) => {
    const reply = JSON.parse(String(data)) as { id?: number; result?: Record<string, number> };
    if (reply.id !== undefined) waiting.get(reply.id)?.(reply.result ?? {});
  });
  return {
    call: (method) =>
      new Promise((resolve) => {
        const n = ++id;
        waiting.set(n, resolve);
        ws.send(JSON.stringify({ id: n, method }));
      }),
    close: () => ws.terminate(),
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

async function main() {
  if (K_MAX > SOCKETS)
    throw new Error('--steps may not exceed --sockets (every room has k distinct members)');
  console.log(`starting 1 instance (PostgreSQL + private redis-server)…; ${machineLoad()}`);
  const inspectPort = await freePort();
  const cluster = await startCluster({
    instances: 1,
    redis: 'private',
    env: {
      ...ONE_ADDRESS_LIMITS,
      ...PRODUCTION_LIVENESS,
      LOG_LEVEL: 'warn',
      CHAT_FRAME_LIMIT: '1000000',
      CHAT_MAX_CONNECTIONS_PER_IP: String(SOCKETS + 100),
      WS_PING_INTERVAL_MS: '600000',
      METRICS_API_KEY: METRICS_KEY,
      NODE_OPTIONS: `--inspect=127.0.0.1:${inspectPort}`,
    },
  });
  const db = await openDb(cluster);
  const sockets: WebSocket[] = [];
  const port = cluster.port(0);
  const devtools = await inspector(inspectPort);
  const read = async (): Promise<Reading> => {
    await sleep(3000);
    const rss: number[] = [];
    const heap: number[] = [];
    for (let i = 0; i < 5; i++) {
      rss.push(rssOfPort(port));
      heap.push(await promValue(cluster, 0, 'herald_nodejs_heap_size_used_bytes'));
      await sleep(1000);
    }
    await devtools.call('HeapProfiler.collectGarbage');
    const usage = await devtools.call('Runtime.getHeapUsage');
    return {
      rssKiB: median(rss),
      heapFloor: Math.min(...heap),
      heapMedian: median(heap),
      gcHeap: usage.usedSize ?? Number.NaN,
      gcRssKiB: rssOfPort(port),
    };
  };
  try {
    const users = await seedUsers(cluster, db, 'rm', SOCKETS);
    // Room r's members: users r, r−1, …, r−K_MAX+1 (mod N); so user i is a member of rooms i … i+K_MAX−1.
    const rooms = await seedRooms(
      db,
      'private',
      Array.from({ length: SOCKETS }, (_, r) =>
        Array.from({ length: K_MAX }, (_, j) => users.ids[(r - j + SOCKETS) % SOCKETS] ?? ''),
      ),
    );
    const roomOf = (i: number, j: number) => rooms[(i + j) % SOCKETS]?.id ?? '';
    const before = await read();
    await pool(SOCKETS, 50, async (i) => {
      sockets[i] = await connectRooms(port, users.cookies[i] ?? '');
    });
    const connected = await read();
    const rows: Array<Record<string, string | number>> = [];
    const row = (label: string, subs: number, r: Reading) => ({
      state: label,
      subscriptions: subs,
      'RSS MiB': (r.rssKiB / 1024).toFixed(1),
      'heap floor MiB': (r.heapFloor / 2 ** 20).toFixed(1),
      'heap median MiB': (r.heapMedian / 2 ** 20).toFixed(1),
      'after GC: heap MiB': (r.gcHeap / 2 ** 20).toFixed(1),
      'after GC: RSS MiB': (r.gcRssKiB / 1024).toFixed(1),
    });
    rows.push(row('before sockets', 0, before), row(`${SOCKETS} sockets, no room`, 0, connected));
    const readings: Array<{ k: number; r: Reading }> = [];
    let done = 0;
    for (const k of STEPS) {
      const t0 = performance.now();
      await pool(SOCKETS, 100, async (i) => {
        await subscribeAll(
          sockets[i] as WebSocket,
          Array.from({ length: k - done }, (_, j) => roomOf(i, done + j)),
        );
      });
      const seconds = (performance.now() - t0) / 1000;
      done = k;
      const r = await read();
      readings.push({ k, r });
      rows.push(row(`k = ${k} (subscribed in ${seconds.toFixed(1)} s)`, SOCKETS * k, r));
    }
    printTable(
      rows,
      `\none instance, ${SOCKETS} sockets, each subscribed to k private rooms (no forced GC, then after one)`,
    );
    const perSocket = (x: number, y: number) => ((x - y) / SOCKETS).toFixed(0);
    console.log(
      `per socket (no room): RSS ${perSocket(connected.rssKiB * 1024, before.rssKiB * 1024)} B, heap floor ${perSocket(connected.heapFloor, before.heapFloor)} B; ` +
        `after GC: heap ${perSocket(connected.gcHeap, before.gcHeap)} B`,
    );
    const first = readings[0];
    const last = readings.at(-1);
    if (first && last && last.k > first.k) {
      const subs = SOCKETS * (last.k - first.k);
      console.log(
        `per subscription (k = ${first.k} → ${last.k}, ${subs} subscriptions): RSS ${(((last.r.rssKiB - first.r.rssKiB) * 1024) / subs).toFixed(0)} B, ` +
          `heap floor ${((last.r.heapFloor - first.r.heapFloor) / subs).toFixed(0)} B, heap median ${((last.r.heapMedian - first.r.heapMedian) / subs).toFixed(0)} B (no forced GC); ` +
          `after a forced GC: heap ${((last.r.gcHeap - first.r.gcHeap) / subs).toFixed(0)} B, RSS ${(((last.r.gcRssKiB - first.r.gcRssKiB) * 1024) / subs).toFixed(0)} B; ${machineLoad()}`,
      );
    }
  } finally {
    for (const ws of sockets) ws?.terminate();
    devtools.close();
    await db.end();
    await cluster.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
