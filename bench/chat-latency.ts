// Chat fan-out latency across instances: two real server processes (shared PostgreSQL database, private
// redis-server), 1,000 WebSocket clients spread over them, 100 messages/s sent on instance A, end-to-end latency
// measured on sockets of instance B (and, for comparison, of A). Prints a table.
// --cluster: the instances share a private Redis Cluster (3 masters + 3 replicas) instead of one redis-server.
// Usage: npm run bench -- chat-latency [--sockets 1000] [--rate 100] [--seconds 20] [--observers 50] [--cluster]
//        [--instances 2] [--inline-discard] [--discard-nice 19] [--full-clients] [--ws-observers] [--cpu-prof-dir DIR]
//        (--cpu-prof-dir: every instance runs under --cpu-prof; summarise with `npx tsx bench/_profile.ts FILE`)
//        (observers: parsed sockets on each instance other than A)
//        CHAT_COALESCE_MS in the environment reaches the instances (0: no coalescing across turns).
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { CLUSTER_ORIGIN, startCluster, type TestCluster } from '@herald/server/testkit';
import WebSocket from 'ws';
import {
  cpuSecondsOfPort,
  flagArg,
  machineLoad,
  numberArg,
  ONE_ADDRESS_LIMITS,
  PRODUCTION_LIVENESS,
  percentile,
  printTable,
  rssOfPort,
  stringArg,
} from './_lib.js';

const SOCKETS = numberArg('sockets', 1000);
const RATE = numberArg('rate', 100);
const SECONDS = numberArg('seconds', 20);
const WARMUP_SECONDS = 3;
const OBSERVERS = numberArg('observers', 50);
const INSTANCES = Math.max(2, numberArg('instances', 2));
// Many sender sockets, as many users would be: one socket processes its own requests one after another.
const SENDERS = 50;
// By default the sockets that are not observed are raw TCP clients that complete the WebSocket handshake and then
// discard what they receive: the server does exactly the same work for them, while the benchmark process (on the
// same 2 cores) does not spend a core decoding 100,000 frames/s. --full-clients uses `ws` for every socket.
const FULL_CLIENTS = flagArg('full-clients');
// The discarding clients run in a worker thread of their own by default, so ~190,000 reads a second do not sit
// on the measuring thread (its event-loop delay p99: 30 ms on the worker against 123 ms inline). The end-to-end
// figures came out the same either way (docs/performance.md); --inline-discard keeps the old arrangement.
const INLINE_DISCARD = flagArg('inline-discard');
// Observed sockets are raw clients on a worker thread of their own, stamping each frame as it is read: parsing
// 110 frames a message with `ws` on the measuring thread put that thread's queue and GC pauses into the figures
// (per message, 1.1 ms between the first and the last observer at the median; the thread stalled up to 58 ms).
// --ws-observers keeps that arrangement (the published figures before 2026-11-29 used it).
const WS_OBSERVERS = flagArg('ws-observers');
const CPU_PROF_DIR = stringArg('cpu-prof-dir', '');
// --discard-nice 19: the discarding clients' thread runs at that nice value, so the 1,900-odd sockets standing
// for other people's devices (in production: other machines) take the cores only when the servers and the
// measuring thread leave them idle. Off (0) by default; docs/performance.md gives both.
const DISCARD_NICE = numberArg('discard-nice', 0);
const METRICS_KEY = 'bench-metrics-key-bench-metrics-key-0123';

async function busLatency(cluster: TestCluster, i: number): Promise<string> {
  try {
    const res = await fetch(`${cluster.url(i)}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_KEY}` },
    });
    const m = (await res.json()) as { pubsub: { averageLatencyMs: number; maxLatencyMs: number } };
    return `avg ${m.pubsub.averageLatencyMs.toFixed(1)} ms, max ${m.pubsub.maxLatencyMs.toFixed(1)} ms`;
  } catch {
    return 'n/a';
  }
}

async function signUpMember(cluster: TestCluster): Promise<string> {
  const { createVerifiedUserOn } = await import('@herald/server/testkit');
  return (await createVerifiedUserOn(cluster, 0, { name: 'Bench sender' })).cookie;
}

function connect(port: number, cookie?: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { origin: CLUSTER_ORIGIN };
    if (cookie) headers.cookie = cookie;
    const ws = new WebSocket(`ws://127.0.0.1:${port}/chat`, {
      headers,
      perMessageDeflate: false,
      skipUTF8Validation: true,
    });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
}

/** A WebSocket client that only reads and discards (see FULL_CLIENTS). */
function connectDiscarding(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(
        `GET /chat HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n` +
          `Origin: ${CLUSTER_ORIGIN}\r\n\r\n`,
      );
    });
    let head = '';
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      if (!head.startsWith('HTTP/1.1 101')) {
        reject(new Error(`upgrade refused: ${head.split('\r\n')[0]}`));
        return;
      }
      socket.on('data', () => {});
      resolve(socket);
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
}

// Plain JavaScript, so the worker needs no TypeScript loader. One worker script, two roles (workerData.role):
// 'discard' drops what its sockets receive; 'observe' finds each new_message frame's clientMessageId in the raw
// bytes and records it with the time it was read. One scratch buffer for every socket's reads (`onread`): the
// bytes are handled before the next read, so nothing is allocated per read beyond the observer's scan.
const CLIENT_WORKER = `
const net = require('node:net');
const { randomBytes } = require('node:crypto');
const { parentPort, workerData } = require('node:worker_threads');
// Linux applies a nice value per thread: this lowers only this thread, not the measuring ones.
if (workerData.nice) {
  const tid = Number(require('node:fs').readlinkSync('/proc/thread-self').split('/').pop());
  require('node:os').setPriority(tid, workerData.nice);
}
// The process-wide monotonic clock: the main thread stamps sends with the same one.
const clock = () => Number(process.hrtime.bigint()) / 1e6;
const MARK = '"clientMessageId":"b-';
const scratch = Buffer.allocUnsafe(65536);
const sockets = [];
// Per observing socket: flat [id, readAt, id, readAt, …] while recording.
const records = [];
let recording = false;
function open(port, origin, observe) {
  return new Promise((resolve, reject) => {
    let head = '';
    let upgraded = false;
    let carry = '';
    const rec = [];
    // A frame may be split over two reads: the tail of one read is scanned again with the next.
    const scan = (text, readAt) => {
      let from = 0;
      let i = text.indexOf(MARK);
      while (i >= 0) {
        let j = i + MARK.length;
        let id = 0;
        while (j < text.length && text.charCodeAt(j) >= 48 && text.charCodeAt(j) <= 57) id = id * 10 + text.charCodeAt(j++) - 48;
        if (j >= text.length) { carry = text.slice(i); return; }
        if (j > i + MARK.length && recording) rec.push(id, readAt);
        from = j;
        i = text.indexOf(MARK, j);
      }
      carry = text.slice(Math.max(from, text.length - MARK.length - 16));
    };
    const socket = net.connect(
      { port, host: '127.0.0.1', onread: { buffer: scratch, callback(n, buf) {
        if (upgraded) {
          if (observe) scan(carry + buf.latin1Slice(0, n), clock());
          return;
        }
        head += buf.latin1Slice(0, n);
        const end = head.indexOf('\\r\\n\\r\\n');
        if (end < 0) return;
        upgraded = true;
        if (!head.startsWith('HTTP/1.1 101')) {
          socket.destroy();
          reject(new Error('upgrade refused: ' + head.split('\\r\\n')[0]));
          return;
        }
        if (observe) records.push(rec);
        resolve(socket);
      } } },
      () => socket.write(
        'GET /chat HTTP/1.1\\r\\nHost: 127.0.0.1:' + port + '\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n' +
        'Sec-WebSocket-Key: ' + randomBytes(16).toString('base64') + '\\r\\nSec-WebSocket-Version: 13\\r\\n' +
        'Origin: ' + origin + '\\r\\n\\r\\n'),
    );
    socket.once('error', reject);
    socket.on('error', () => {});
  });
}
parentPort.on('message', async (msg) => {
  if (msg.type === 'record') {
    recording = msg.on;
    parentPort.postMessage({ type: 'ok' });
    return;
  }
  if (msg.type === 'results') {
    parentPort.postMessage({ type: 'results', records: records.map((r) => Float64Array.from(r)) });
    return;
  }
  if (msg.type === 'close') {
    for (const s of sockets) s.destroy();
    parentPort.postMessage({ type: 'closed' });
    return;
  }
  try {
    for (let i = 0; i < msg.count; i += 50) {
      const batch = Array.from({ length: Math.min(50, msg.count - i) }, () => open(msg.port, msg.origin, workerData.role === 'observe'));
      sockets.push(...(await Promise.all(batch)));
    }
    parentPort.postMessage({ type: 'opened' });
  } catch (err) {
    parentPort.postMessage({ type: 'error', message: String(err) });
  }
});
`;

type WorkerRequest =
  | { type: 'open'; port: number; count: number; origin: string }
  | { type: 'record'; on: boolean }
  | { type: 'results' }
  | { type: 'close' };

/**
 * Raw WebSocket clients on a worker thread: the server's work is the same as for `ws` clients, the measuring
 * thread stays free. 'discard' clients drop what they read; 'observe' clients record when each message arrived.
 */
class ClientPool {
  private readonly worker: Worker;
  constructor(role: 'discard' | 'observe', nice: number) {
    this.worker = new Worker(CLIENT_WORKER, { eval: true, workerData: { nice, role } });
  }
  private ask<T>(message: WorkerRequest): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.worker.once('message', (reply: { type: string; message?: string }) =>
        reply.type === 'error' ? reject(new Error(reply.message)) : resolve(reply as T),
      );
      this.worker.postMessage(message);
    });
  }
  async open(port: number, count: number): Promise<void> {
    if (count > 0) await this.ask({ type: 'open', port, count, origin: CLUSTER_ORIGIN });
  }
  async record(on: boolean): Promise<void> {
    await this.ask({ type: 'record', on });
  }
  /** Per observing socket, in the order opened: flat [id, readAt, …] (readAt: `clock()` ms). */
  async results(): Promise<Float64Array[]> {
    return (await this.ask<{ records: Float64Array[] }>({ type: 'results' })).records;
  }
  async close(): Promise<void> {
    await this.ask({ type: 'close' });
    await this.worker.terminate();
  }
}

/** The clock both threads stamp with: process-wide and monotonic (ms). */
const clock = () => Number(process.hrtime.bigint()) / 1e6;

/** An instance's metrics in Prometheus's text format, as lines. */
async function prometheusLines(cluster: TestCluster, i: number): Promise<string[]> {
  const res = await fetch(`${cluster.url(i)}/metrics?format=prometheus`, {
    headers: { authorization: `Bearer ${METRICS_KEY}` },
  });
  return (await res.text()).split('\n');
}

interface HistogramTotals {
  sum: number;
  count: number;
  /** Observations over 2.5 ms and over 5 ms (the histogram's buckets at those bounds). */
  over2_5: number;
  over5: number;
}

/** Sum, count and tail counts of each labelled series of a histogram, from an instance's Prometheus text. */
async function histogramTotals(
  cluster: TestCluster,
  i: number,
  name: string,
): Promise<Map<string, HistogramTotals>> {
  const totals = new Map<string, HistogramTotals & { le2_5: number; le5: number }>();
  const series = new RegExp(`^${name}_(sum|count|bucket)(?:\\{([^}]*)\\})? (\\S+)$`);
  for (const line of await prometheusLines(cluster, i)) {
    const m = series.exec(line);
    if (!m) continue;
    const stage = /stage="([^"]+)"/.exec(m[2] ?? '')?.[1] ?? '';
    const t = totals.get(stage) ?? { sum: 0, count: 0, over2_5: 0, over5: 0, le2_5: 0, le5: 0 };
    const value = Number(m[3]);
    if (m[1] === 'sum') t.sum = value;
    else if (m[1] === 'count') t.count = value;
    else if (/le="0\.0025"/.test(m[2] ?? '')) t.le2_5 = value;
    else if (/le="0\.005"/.test(m[2] ?? '')) t.le5 = value;
    totals.set(stage, t);
  }
  for (const t of totals.values()) {
    t.over2_5 = t.count - t.le2_5;
    t.over5 = t.count - t.le5;
  }
  return totals;
}

/** GC time and count per kind (minor, major, incremental, weakcb), from prom-client's default GC metric. */
async function gcTotals(
  cluster: TestCluster,
  i: number,
): Promise<Map<string, { sum: number; count: number }>> {
  const totals = new Map<string, { sum: number; count: number }>();
  for (const line of await prometheusLines(cluster, i)) {
    const m = /^herald_nodejs_gc_duration_seconds_(sum|count)\{[^}]*kind="([^"]+)"[^}]*\} (\S+)$/.exec(line);
    if (!m?.[2]) continue;
    const t = totals.get(m[2]) ?? { sum: 0, count: 0 };
    if (m[1] === 'sum') t.sum = Number(m[3]);
    else t.count = Number(m[3]);
    totals.set(m[2], t);
  }
  return totals;
}

/** A counter's value on an instance (NaN when the instance does not have it, e.g. older code). */
async function counterValue(cluster: TestCluster, i: number, name: string): Promise<number> {
  const line = (await prometheusLines(cluster, i)).find(
    (l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `),
  );
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : Number.NaN;
}

/** Mean per stage (ms) and how many took over 2.5 / 5 ms, between two readings of every instance. */
function stageMeans(before: Map<string, HistogramTotals>[], after: Map<string, HistogramTotals>[]): string {
  const stages = new Set(after.flatMap((m) => [...m.keys()]));
  return [...stages]
    .map((stage) => {
      const d = { sum: 0, count: 0, over2_5: 0, over5: 0 };
      after.forEach((m, k) => {
        for (const key of ['sum', 'count', 'over2_5', 'over5'] as const) {
          d[key] += (m.get(stage)?.[key] ?? 0) - (before[k]?.get(stage)?.[key] ?? 0);
        }
      });
      const mean = d.count ? ((d.sum / d.count) * 1000).toFixed(2) : 'n/a';
      return `${stage || 'all'} ${mean} ms (${d.count}; > 2.5 ms ${d.over2_5}, > 5 ms ${d.over5})`;
    })
    .join(', ');
}

interface Closeable {
  terminate?: () => void;
  destroy?: () => void;
}

async function connectMany<T>(count: number, make: () => Promise<T>): Promise<T[]> {
  const sockets: T[] = [];
  for (let i = 0; i < count; i += 50) {
    sockets.push(...(await Promise.all(Array.from({ length: Math.min(50, count - i) }, make))));
  }
  return sockets;
}

interface Observer {
  latencies: number[];
  seen: Map<number, number>;
}

/** A `ws` client's arrivals while recording, flat [id, readAt, …] as the observing worker keeps them. */
function recordWs(ws: WebSocket, recording: () => boolean): number[] {
  const rec: number[] = [];
  ws.on('message', (data) => {
    const readAt = clock();
    if (!recording()) return;
    const event = JSON.parse(String(data)) as { type: string; message?: { clientMessageId?: string } };
    const id = event.message?.clientMessageId;
    if (event.type === 'new_message' && id?.startsWith('b-')) rec.push(Number(id.slice(2)), readAt);
  });
  return rec;
}

/** Latencies of the measured messages and how often each message arrived, from one socket's arrivals. */
function toObserver(rec: ArrayLike<number>, sentAt: Map<number, number>, measuredFrom: number): Observer {
  const o: Observer = { latencies: [], seen: new Map() };
  for (let i = 0; i + 1 < rec.length; i += 2) {
    const id = rec[i] as number;
    const t = sentAt.get(id);
    if (t === undefined) continue;
    o.seen.set(id, (o.seen.get(id) ?? 0) + 1);
    if (id >= measuredFrom) o.latencies.push((rec[i + 1] as number) - t);
  }
  return o;
}

/** The observed sockets: each other instance's, then A's. */
interface Observation {
  sockets: number;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Each socket's arrivals, grouped as opened (one group per other instance, then A). */
  arrivals(): Promise<ArrayLike<number>[][]>;
  close(): Promise<void>;
}

const A_OBSERVERS = 10;

/** `ws` clients parsing on this thread (--ws-observers: the arrangement of the figures before 2026-11-29). */
async function observeWithWs(cluster: TestCluster, others: number[]): Promise<Observation> {
  let recording = false;
  const groups: WebSocket[][] = [];
  for (const k of others) groups.push(await connectMany(OBSERVERS, () => connect(cluster.port(k))));
  groups.push(await connectMany(A_OBSERVERS, () => connect(cluster.port(0))));
  const recs = groups.map((list) => list.map((ws) => recordWs(ws, () => recording)));
  return {
    sockets: groups.flat().length,
    async start() {
      recording = true;
    },
    async stop() {
      recording = false;
    },
    async arrivals() {
      return recs;
    },
    async close() {
      for (const ws of groups.flat()) ws.terminate();
    },
  };
}

/** Raw clients on a worker thread of their own, recording when each frame was read (the default). */
async function observeOnWorker(cluster: TestCluster, others: number[]): Promise<Observation> {
  const pool = new ClientPool('observe', 0);
  const sizes = [...others.map(() => OBSERVERS), A_OBSERVERS];
  for (const k of others) await pool.open(cluster.port(k), OBSERVERS);
  await pool.open(cluster.port(0), A_OBSERVERS);
  return {
    sockets: OBSERVERS * others.length + A_OBSERVERS,
    start: () => pool.record(true),
    stop: () => pool.record(false),
    async arrivals() {
      const all = await pool.results();
      return sizes.map((n, k) => {
        const from = sizes.slice(0, k).reduce((a, b) => a + b, 0);
        return all.slice(from, from + n);
      });
    },
    close: () => pool.close(),
  };
}

async function main() {
  const onCluster = flagArg('cluster');
  console.log(
    `starting ${INSTANCES} instances (PostgreSQL + ${onCluster ? 'private Redis Cluster, 3 masters + 3 replicas' : 'private redis-server'})…; ${machineLoad()}`,
  );
  const cluster = await startCluster({
    instances: INSTANCES,
    redis: onCluster ? 'cluster' : 'private',
    env: {
      ...ONE_ADDRESS_LIMITS,
      ...PRODUCTION_LIVENESS,
      LOG_LEVEL: 'warn',
      CHAT_THROTTLE_LIMIT: '1000000',
      CHAT_FRAME_LIMIT: '1000000',
      CHAT_MAX_CONNECTIONS_PER_IP: String(SOCKETS * 2),
      CHAT_MAX_CONNECTIONS_PER_USER: String(SENDERS * 2),
      PRESENCE_DEBOUNCE_MS: '500',
      // Discarding clients cannot answer pings; keep the first ping round beyond the run.
      WS_PING_INTERVAL_MS: FULL_CLIENTS ? '30000' : '600000',
      METRICS_API_KEY: METRICS_KEY,
      ...(CPU_PROF_DIR ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${CPU_PROF_DIR}` } : {}),
    },
  });
  const all: Closeable[] = [];
  let discardPool: ClientPool | undefined;
  let observation: Observation | undefined;
  try {
    const cookie = await signUpMember(cluster);
    // A (instance 0) gets its share; the others split the rest evenly.
    const perInstance = Math.floor(SOCKETS / INSTANCES);
    const others = Array.from({ length: INSTANCES - 1 }, (_, k) => k + 1);
    const shareOf = (k: number) =>
      Math.floor((SOCKETS - perInstance) / (INSTANCES - 1)) +
      (k <= (SOCKETS - perInstance) % (INSTANCES - 1) ? 1 : 0);
    const senders = await Promise.all(
      Array.from({ length: SENDERS }, () => connect(cluster.port(0), cookie)),
    );
    const sentAt = new Map<number, number>();
    const ports = Array.from({ length: INSTANCES }, (_, k) => cluster.port(k));
    const rssBefore = ports.map(rssOfPort);
    const t0 = performance.now();
    observation = WS_OBSERVERS
      ? await observeWithWs(cluster, others)
      : await observeOnWorker(cluster, others);
    const restCounts: Array<[number, number]> = [
      [cluster.port(0), perInstance - SENDERS - A_OBSERVERS],
      ...others.map((k): [number, number] => [cluster.port(k), shareOf(k) - OBSERVERS]),
    ];
    const rest: Closeable[] = [];
    if (FULL_CLIENTS || INLINE_DISCARD) {
      const quiet = (port: number): Promise<Closeable> =>
        FULL_CLIENTS ? connect(port) : connectDiscarding(port);
      for (const [port, count] of restCounts) rest.push(...(await connectMany(count, () => quiet(port))));
    } else {
      discardPool = new ClientPool('discard', DISCARD_NICE);
      for (const [port, count] of restCounts) await discardPool.open(port, count);
    }
    all.push(...senders, ...rest);
    const connected =
      all.length + observation.sockets + (discardPool ? restCounts.reduce((a, [, c]) => a + c, 0) : 0);
    const connectSeconds = (performance.now() - t0) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const rssAfter = ports.map(rssOfPort);
    console.log(
      `${connected} sockets connected in ${connectSeconds.toFixed(1)} s; sending ${RATE} msg/s on A…`,
    );

    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    // CPU used while sending, per server process and by this process (the clients), against the wall clock.
    // Server-side stage timings (sums and counts) around the run, from every instance's Prometheus text.
    const readStages = () =>
      Promise.all([
        Promise.all(ports.map((_, k) => histogramTotals(cluster, k, 'herald_chat_send_stage_seconds'))),
        Promise.all(ports.map((_, k) => histogramTotals(cluster, k, 'herald_pubsub_latency_seconds'))),
        Promise.all(ports.map((_, k) => histogramTotals(cluster, k, 'herald_chat_fanout_duration_seconds'))),
      ]);
    const readWrites = () =>
      Promise.all(
        ports.map(async (_, k) => ({
          frames: await counterValue(cluster, k, 'herald_chat_fanout_frames_total'),
          writes: await counterValue(cluster, k, 'herald_chat_socket_writes_total'),
        })),
      );
    const stagesBefore = await readStages();
    const gcBefore = await Promise.all(ports.map((_, k) => gcTotals(cluster, k)));
    const writesBefore = await readWrites();
    const cpuBefore = ports.map(cpuSecondsOfPort);
    const ownCpuBefore = process.cpuUsage();
    let n = 0;
    const intervalMs = 1000 / RATE;
    await observation.start();
    const start = performance.now();
    const total = RATE * (WARMUP_SECONDS + SECONDS);
    let measuredFrom = -1;
    await new Promise<void>((resolve) => {
      const tick = () => {
        const due = Math.min(total, Math.floor((performance.now() - start) / intervalMs) + 1);
        while (n < due) {
          if (measuredFrom < 0 && n >= RATE * WARMUP_SECONDS) measuredFrom = n;
          const id = n++;
          sentAt.set(id, clock());
          senders[id % SENDERS]?.send(
            JSON.stringify({
              type: 'send_message',
              message: `bench message ${id}`,
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
    const ownCpu = process.cpuUsage(ownCpuBefore);
    // Let the last messages arrive.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const writesAfter = await readWrites();
    const gcAfter = await Promise.all(ports.map((_, k) => gcTotals(cluster, k)));
    await observation.stop();
    const arrivals = await observation.arrivals();
    const observersByInstance = arrivals
      .slice(0, -1)
      .map((group) => group.map((rec) => toObserver(rec, sentAt, measuredFrom)));
    const observersA = (arrivals.at(-1) ?? []).map((rec) => toObserver(rec, sentAt, measuredFrom));

    const expected = total - measuredFrom;
    const rows: Array<readonly [string, Observer[]]> = [
      ...observersByInstance.map((o, k) => [`instance ${k + 1} (other)`, o] as const),
      ['all other instances', observersByInstance.flat()] as const,
      ['A (same instance)', observersA] as const,
    ];
    const table = rows.map(([where, observers]) => {
      const latencies = observers.flatMap((o) => o.latencies).sort((x, y) => x - y);
      let missing = 0;
      let duplicates = 0;
      for (const o of observers) {
        for (let id = measuredFrom; id < total; id++) {
          const c = o.seen.get(id) ?? 0;
          if (c === 0) missing++;
          if (c > 1) duplicates += c - 1;
        }
      }
      return {
        'received on': where,
        sockets: `${observers.length} observed`,
        samples: latencies.length,
        'p50 ms': percentile(latencies, 50).toFixed(1),
        'p99 ms': percentile(latencies, 99).toFixed(1),
        'max ms': (latencies.at(-1) ?? Number.NaN).toFixed(1),
        missing,
        duplicates,
      };
    });
    console.log(
      `\n${connected} sockets over ${INSTANCES} instances (${perInstance} on A, ${SOCKETS - perInstance} on the others; ` +
        `${SENDERS} senders (ws), ${observation.sockets} observers (${WS_OBSERVERS ? 'ws, on this thread' : 'raw, on a worker thread'}), ` +
        `${FULL_CLIENTS ? 'the rest ws clients' : `the rest discarding${discardPool ? ` on a worker thread, nice ${DISCARD_NICE}` : ''}`}), ` +
        `${RATE} msg/s on A for ${SECONDS} s ` +
        `after ${WARMUP_SECONDS} s warm-up (${expected} messages measured); ${machineLoad()}`,
    );
    printTable(table);
    // Per message, its first and its last arrival on the other instances: the spread is the fan-out's order (and,
    // with --ws-observers, this thread's parsing), the first arrival the path itself.
    const firstLast = new Map<number, [number, number]>();
    arrivals
      .slice(0, -1)
      .flat()
      .forEach((rec) => {
        for (let i = 0; i + 1 < rec.length; i += 2) {
          const id = rec[i] as number;
          const t = sentAt.get(id);
          if (t === undefined || id < measuredFrom) continue;
          const l = (rec[i + 1] as number) - t;
          const fl = firstLast.get(id);
          firstLast.set(id, fl ? [Math.min(fl[0], l), Math.max(fl[1], l)] : [l, l]);
        }
      });
    const firsts = [...firstLast.values()].map((fl) => fl[0]).sort((x, y) => x - y);
    const lasts = [...firstLast.values()].map((fl) => fl[1]).sort((x, y) => x - y);
    console.log(
      `per message on the other instances: first arrival p50 / p99 ${percentile(firsts, 50).toFixed(1)} / ` +
        `${percentile(firsts, 99).toFixed(1)} ms, last arrival p50 / p99 ${percentile(lasts, 50).toFixed(1)} / ` +
        `${percentile(lasts, 99).toFixed(1)} ms`,
    );
    const share = (cpuSeconds: number) => `${((cpuSeconds / sendingSeconds) * 100).toFixed(0)} %`;
    console.log(
      `CPU while sending (${sendingSeconds.toFixed(1)} s; 200 % = both cores): ` +
        `${cpuUsed.map((c, k) => `${k === 0 ? 'A' : `instance ${k}`} ${share(c)}`).join(', ')}, ` +
        `bench clients ${share((ownCpu.user + ownCpu.system) / 1e6)}`,
    );
    // Every instance fans every message out, so an instance's CPU per message is its CPU over the messages sent.
    console.log(
      `CPU per message: ${cpuUsed
        .map((c, k) => `${k === 0 ? 'A' : `instance ${k}`} ${((c / n) * 1000).toFixed(2)} ms`)
        .join(', ')}`,
    );
    console.log(
      `fan-out frames / socket writes per second (server counters, over the sending time): ${writesAfter
        .map((w, k) => {
          const b = writesBefore[k];
          const frames = (w.frames - (b?.frames ?? Number.NaN)) / sendingSeconds;
          const writes = (w.writes - (b?.writes ?? Number.NaN)) / sendingSeconds;
          return `${k === 0 ? 'A' : `instance ${k}`} ${frames.toFixed(0)} / ${writes.toFixed(0)}`;
        })
        .join(', ')}`,
    );
    // GC pauses hold every message being handled: their share of the sending time is a floor under the tail.
    console.log(
      `GC while sending (ms over ${sendingSeconds.toFixed(1)} s, collections): ${gcAfter
        .map((after, k) => {
          const kinds = [...after]
            .map(([kind, t]) => {
              const b = gcBefore[k]?.get(kind) ?? { sum: 0, count: 0 };
              return `${kind} ${((t.sum - b.sum) * 1000).toFixed(0)} (${t.count - b.count})`;
            })
            .join(' ');
          return `${k === 0 ? 'A' : `instance ${k}`}: ${kinds}`;
        })
        .join('; ')}`,
    );
    loopDelay.disable();
    console.log(
      `bench client event-loop delay: p50 ${(loopDelay.percentile(50) / 1e6).toFixed(1)} ms, ` +
        `p99 ${(loopDelay.percentile(99) / 1e6).toFixed(1)} ms, max ${(loopDelay.max / 1e6).toFixed(1)} ms`,
    );
    console.log(`bus latency received on B (server /metrics): ${await busLatency(cluster, 1)}`);
    const stagesAfter = await readStages();
    console.log(
      `server stages, mean over the run and slow ones (all instances): send on A: ${stageMeans(stagesBefore[0], stagesAfter[0])}; ` +
        `bus hop: ${stageMeans(stagesBefore[1], stagesAfter[1])}; ` +
        `fan-out to local sockets: ${stageMeans(stagesBefore[2], stagesAfter[2])}`,
    );
    const perSocketKiB = (i: number) =>
      ((rssAfter[i] ?? 0) - (rssBefore[i] ?? 0)) / (i === 0 ? perInstance : shareOf(i));
    console.log(
      `server RSS growth per connected socket (after connect, before sending): ${ports
        .map((_, i) => `${i === 0 ? 'A' : `instance ${i}`} ${perSocketKiB(i).toFixed(1)} KiB`)
        .join(', ')}`,
    );
  } finally {
    for (const c of all) {
      c.terminate?.();
      c.destroy?.();
    }
    await discardPool?.close();
    await observation?.close();
    await cluster.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
