// The fault run of issue 22: two real server processes (shared PostgreSQL, private redis-server) under mixed load
// — HTTP reads and writes on fresh connections, U users × D SSE streams that reconnect with Last-Event-ID, and
// chat sockets sending — through, in turn:
//   1. --kills database connection kills, --kill-gap-ms apart: pg_terminate_backend of every backend whose
//      application_name is one of the two instances' (herald:<instanceId>), in the run's database only;
//   2. a Redis kill (SIGKILL of the private redis-server, --redis-down s, then started again, empty);
//   3. a rolling SIGTERM of both instances (each waited for, then started again on the same port).
// It counts:
//   crashes      — an instance that exited without our SIGTERM, or with a non-zero code after it;
//   resets       — HTTP requests whose connection was reset or closed before a full response (every request
//                  opens its own connection, so a keep-alive race cannot be counted as a reset); connections
//                  refused while an instance is down for its restart are counted apart (a client retries them);
//   5xx ≠ 503    — any other server error;
//   sends lost / duplicated — every admin send carries a unique title and an Idempotency-Key and is retried
//                  (same key, the other instance) after a 503, a refusal or a reset until it gets a 200: then
//                  PostgreSQL must hold exactly one notification with that title;
//   SSE missing / duplicated — the exact accounting of _fault.ts: every logged event id of a user must reach
//                  each of that user's streams exactly once, through every reconnect.
// Usage: npm run bench -- fault-run [--users 30] [--devices 2] [--rate 40] [--chat 10] [--kills 10]
//        [--kill-gap-ms 1000] [--redis-down 5] [--grace-ms 5000]
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { CLUSTER_ORIGIN } from '@herald/server/testkit';
import WebSocket from 'ws';
import {
  audit,
  type FaultClient,
  type FaultSetup,
  finalSeqs,
  fmtMs,
  openClients,
  setupFault,
  sleep,
} from './_fault.js';
import { machineLoad, numberArg, printTable } from './_lib.js';

const USERS = numberArg('users', 30);
const DEVICES = numberArg('devices', 2);
const RATE = numberArg('rate', 40);
const CHAT = numberArg('chat', 10);
const KILLS = numberArg('kills', 10);
const KILL_GAP_MS = numberArg('kill-gap-ms', 1000);
const REDIS_DOWN_S = numberArg('redis-down', 5);
const GRACE_MS = numberArg('grace-ms', 5000);
const KEEPALIVE_MS = 2000;
const MAX_IN_FLIGHT = numberArg('max-in-flight', 32);

interface Outcome {
  status?: number;
  body?: string;
  /**
   * 'reset' (the connection closed before any response), 'reset-mid-response' (after the status line),
   * 'refused' (nothing listening), 'timeout' (no full response in 30 s)
   */
  failure?: 'reset' | 'reset-mid-response' | 'refused' | 'timeout';
  detail?: string;
}

/** The phase of the run a request started in (resets and timeouts are reported per phase). */
let phase = 'warm-up';

/** One request on its own connection (no keep-alive reuse), classified. */
function request(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<Outcome> {
  const at = phase;
  return new Promise((resolve) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: false,
        headers: {
          origin: CLUSTER_ORIGIN,
          connection: 'close',
          ...(payload ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        timeout: 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
        res.on('error', (err) =>
          resolve({ failure: 'reset-mid-response', detail: `${at} ${method} ${path}: ${err.message}` }),
        );
        res.on('aborted', () =>
          resolve({ failure: 'reset-mid-response', detail: `${at} ${method} ${path}: aborted` }),
        );
      },
    );
    req.on('timeout', () => {
      resolve({ failure: 'timeout', detail: `${at} ${method} ${path}` });
      req.destroy();
    });
    req.on('error', (err: NodeJS.ErrnoException) =>
      resolve({
        failure: err.code === 'ECONNREFUSED' ? 'refused' : 'reset',
        detail: `${at} ${method} ${path}: ${err.code ?? err.message}`,
      }),
    );
    req.end(payload);
  });
}

class Tally {
  readonly statuses = new Map<string, number>();
  readonly examples: string[] = [];
  total = 0;
  readonly byPhase = new Map<string, number>();
  add(o: Outcome) {
    this.total++;
    const key = o.failure ?? String(o.status);
    this.statuses.set(key, (this.statuses.get(key) ?? 0) + 1);
    const bad =
      (o.failure !== undefined && o.failure !== 'refused') ||
      (o.status !== undefined && o.status >= 500 && o.status !== 503);
    if (!bad) return;
    const where = `${o.detail?.split(' ')[0] ?? '?'} ${key}`;
    this.byPhase.set(where, (this.byPhase.get(where) ?? 0) + 1);
    if (this.examples.length < 12) this.examples.push(o.detail ?? `${o.status} ${o.body?.slice(0, 160)}`);
  }
  count(pred: (key: string) => boolean) {
    let n = 0;
    for (const [k, v] of this.statuses) if (pred(k)) n += v;
    return n;
  }
}

/** A chat socket that reconnects (1001 going away, or a refused upgrade) and sends a message now and then. */
class ChatDevice {
  ws: WebSocket | undefined;
  opens = 0;
  closes = new Map<number, number>();
  sent = 0;
  received = 0;
  errorsByCode = new Map<string, number>();
  private stopped = false;
  constructor(
    private readonly setup: FaultSetup,
    private readonly cookie: string,
    private home: number,
  ) {}
  open() {
    if (this.stopped) return;
    const port = this.setup.cluster.port(this.home);
    const ws = new WebSocket(`ws://127.0.0.1:${port}/chat`, {
      headers: { origin: CLUSTER_ORIGIN, cookie: this.cookie },
      perMessageDeflate: false,
    });
    this.ws = ws;
    ws.on('open', () => this.opens++);
    ws.on('message', (data) => {
      const frame = JSON.parse(String(data)) as { type: string; code?: string };
      if (frame.type === 'new_message') this.received++;
      if (frame.type === 'error') {
        const code = String(frame.code);
        this.errorsByCode.set(code, (this.errorsByCode.get(code) ?? 0) + 1);
      }
    });
    ws.on('error', () => {});
    ws.on('close', (code) => {
      if (this.ws !== ws) return;
      this.closes.set(code, (this.closes.get(code) ?? 0) + 1);
      // Reconnect like the SDK does: elsewhere after a going-away, with a little jitter.
      this.home = (this.home + 1) % this.setup.cluster.size;
      setTimeout(() => this.open(), 200 + Math.random() * 300);
    });
  }
  send(n: number) {
    if (this.ws?.readyState !== WebSocket.OPEN) return;
    this.sent++;
    this.ws.send(
      JSON.stringify({ type: 'send_message', message: `fault chat ${n}`, clientMessageId: `fc-${n}` }),
    );
  }
  stop() {
    this.stopped = true;
    const ws = this.ws;
    this.ws = undefined;
    ws?.close();
  }
}

async function main() {
  console.log(`starting 2 instances (PostgreSQL + private redis-server), ${USERS} users…`);
  const startLoad = machineLoad();
  const setup = await setupFault({
    instances: 2,
    users: USERS,
    env: {
      SSE_KEEPALIVE_MS: String(KEEPALIVE_MS),
      CHAT_THROTTLE_LIMIT: '100000',
      SHUTDOWN_GRACE_MS: String(GRACE_MS),
      SHUTDOWN_TIMEOUT_MS: '10000',
    },
  });
  const { cluster, db } = setup;
  const size = cluster.size;
  let clients: FaultClient[] = [];
  const chats: ChatDevice[] = [];
  // Exits we did not ask for, and exit codes of the ones we did.
  const expectedExit = new Set<number>();
  const crashes: string[] = [];
  const watchExit = (i: number) => {
    void cluster.exited(i).then((info) => {
      if (!expectedExit.has(i)) crashes.push(`instance ${i} exited on its own: ${JSON.stringify(info)}`);
      else if (info.code !== 0) crashes.push(`instance ${i} exited ${JSON.stringify(info)} after SIGTERM`);
    });
  };
  for (let i = 0; i < size; i++) watchExit(i);
  try {
    const userIds = setup.users.map((u) => u.id);
    const initial = await finalSeqs(db, userIds);
    const opened = await openClients(setup, DEVICES, KEEPALIVE_MS * 3 + 2_000);
    clients = opened.clients;
    for (let k = 0; k < CHAT; k++) {
      const user = setup.users[k % setup.users.length];
      if (!user) break;
      const device = new ChatDevice(setup, user.cookie, k % size);
      device.open();
      chats.push(device);
    }
    console.log(`${clients.length} SSE streams and ${chats.length} chat sockets open; load ${RATE} req/s`);

    // The load: reads, writes and admin sends on random instances, each on its own connection.
    const tally = new Tally();
    const sends = new Map<string, { ok: boolean; attempts: number }>();
    let seq = 0;
    let stopped = false;
    const inFlight = new Set<Promise<void>>();
    const send = async () => {
      const n = seq++;
      const user = setup.users[n % setup.users.length];
      if (!user) return;
      const title = `fault-run ${process.pid} ${n}`;
      const entry = { ok: false, attempts: 0 };
      sends.set(title, entry);
      let instance = n % size;
      // Retried with the same key (on the other instance) until answered 200, like a careful client.
      for (let attempt = 0; attempt < 40 && !entry.ok; attempt++) {
        entry.attempts++;
        const o = await request(
          cluster.port(instance),
          'POST',
          '/admin/notifications/send',
          { cookie: setup.adminCookie, 'idempotency-key': `fr-${process.pid}-${n}` },
          {
            target: { scope: 'user', identifier: user.id },
            notification: { type: 'info', title, content: 'fault run' },
          },
        );
        tally.add(o);
        if (o.status === 200) entry.ok = true;
        else {
          instance = (instance + 1) % size;
          await sleep(o.status === 409 ? 300 : 150);
        }
      }
    };
    const read = async () => {
      const user = setup.users[Math.floor(Math.random() * setup.users.length)];
      if (!user) return;
      const paths = [
        ['GET', '/notification/list?limit=10'],
        ['GET', '/notification/counts'],
        ['GET', '/notification/unread-count'],
        ['PATCH', '/notification/mark-all-read'],
        ['GET', '/chat/history?limit=10'],
      ] as const;
      const [method, path] = paths[Math.floor(Math.random() * paths.length)] ?? paths[0];
      tally.add(
        await request(
          cluster.port(Math.floor(Math.random() * size)),
          method,
          path,
          { cookie: user.cookie },
          undefined,
        ),
      );
    };
    let chatN = 0;
    const ticker = setInterval(() => {
      // A bounded number in flight, like a real client pool: an instance slowed down by the machine is not
      // buried under a queue of requests that can only time out.
      if (stopped || inFlight.size >= MAX_IN_FLIGHT) return;
      const p = (Math.random() < 0.3 ? send() : read()).finally(() => inFlight.delete(p));
      inFlight.add(p);
      if (Math.random() < 0.25) chats[chatN % Math.max(1, chats.length)]?.send(chatN++);
    }, 1000 / RATE);

    const phases: Record<string, string> = {};
    await sleep(5_000);

    // 1. Database connection kills.
    phase = 'db-kills';
    const names = Array.from({ length: size }, (_, i) => `herald:${cluster.instanceId(i)}`);
    let terminated = 0;
    const killStart = performance.now();
    for (let k = 0; k < KILLS; k++) {
      const res = await db.query(
        `select pg_terminate_backend(pid) from pg_stat_activity
         where application_name = any($1) and datname = current_database()`,
        [names],
      );
      terminated += res.rowCount ?? 0;
      await sleep(KILL_GAP_MS);
    }
    phases['database kills'] =
      `${KILLS} × (${terminated} backends in all) over ${fmtMs(performance.now() - killStart)}`;
    await sleep(3_000);

    // 2. Redis kill.
    phase = 'redis-kill';
    const redisStart = performance.now();
    await cluster.redis.stop('SIGKILL');
    await sleep(REDIS_DOWN_S * 1000);
    await cluster.redis.start();
    await Promise.all(Array.from({ length: size }, (_, i) => cluster.waitForHealth(i, 'ok', 60_000)));
    phases['Redis kill'] =
      `down ${REDIS_DOWN_S} s, all instances ok ${fmtMs(performance.now() - redisStart)} after the kill`;
    await sleep(3_000);

    // 3. Rolling SIGTERM.
    phase = 'rolling-sigterm';
    const rollStart = performance.now();
    const rolls: string[] = [];
    for (let i = 0; i < size; i++) {
      expectedExit.add(i);
      const t0 = performance.now();
      const exit = await cluster.kill(i, 'SIGTERM');
      const t1 = performance.now();
      await cluster.start(i).catch(async () => cluster.waitForHealth(i, 'ok', 120_000));
      expectedExit.delete(i);
      watchExit(i);
      rolls.push(
        `${i}: exit ${exit.code ?? exit.signal} in ${fmtMs(t1 - t0)}, up ${fmtMs(performance.now() - t1)} later`,
      );
      await sleep(2_000);
    }
    phases['rolling SIGTERM'] = `${fmtMs(performance.now() - rollStart)} (${rolls.join('; ')})`;
    phase = 'after';
    await sleep(3_000);

    stopped = true;
    clearInterval(ticker);
    await Promise.allSettled([...inFlight]);
    const finals = await finalSeqs(db, userIds);
    const deadline = performance.now() + 60_000;
    while (performance.now() < deadline) {
      if (clients.every((c) => c.live && c.maxId >= (finals.get(c.user.id) ?? 0))) break;
      await sleep(100);
    }
    await sleep(1_000);
    const audits = await audit(db, clients, finals);

    // Sends: every 200 must be exactly one row; none may be two.
    const { rows } = await db.query<{ title: string; n: number }>(
      `select title, count(*)::int as n from notification where title like $1 group by title`,
      [`fault-run ${process.pid} %`],
    );
    const stored = new Map(rows.map((r) => [r.title, r.n]));
    let lost = 0;
    let duplicated = 0;
    let unanswered = 0;
    for (const [title, entry] of sends) {
      const n = stored.get(title) ?? 0;
      if (n > 1) duplicated++;
      if (entry.ok && n === 0) lost++;
      if (!entry.ok) unanswered++;
    }
    let logged = 0;
    for (const id of userIds) logged += (finals.get(id) ?? 0) - (initial.get(id) ?? 0);
    const sum = (f: (a: (typeof audits)[number]) => number) => audits.reduce((s, a) => s + f(a), 0);
    const chatCloses = new Map<number, number>();
    for (const c of chats)
      for (const [code, n] of c.closes) chatCloses.set(code, (chatCloses.get(code) ?? 0) + n);
    const chatErrors = new Map<string, number>();
    for (const c of chats)
      for (const [code, n] of c.errorsByCode) chatErrors.set(code, (chatErrors.get(code) ?? 0) + n);

    const other5xx = tally.count((k) => /^5\d\d$/.test(k) && k !== '503');
    const row: Record<string, string | number> = {
      'crashes (goal 0)': crashes.length,
      'HTTP requests': tally.total,
      '2xx': tally.count((k) => /^2\d\d$/.test(k)),
      '503 UNAVAILABLE': tally.count((k) => k === '503'),
      '4xx (409 in-progress retries, 404…)': tally.count((k) => /^4\d\d$/.test(k)),
      '5xx other than 503 (goal 0)': other5xx,
      'requests reset before / during a response (goal 0)': `${tally.count((k) => k === 'reset')} / ${tally.count((k) => k === 'reset-mid-response')}`,
      'timed out (30 s)': tally.count((k) => k === 'timeout'),
      'connections refused (instance restarting)': tally.count((k) => k === 'refused'),
      'sends answered 200 / never answered': `${[...sends.values()].filter((s) => s.ok).length} / ${unanswered}`,
      'sends lost / duplicated (goal 0/0)': `${lost} / ${duplicated}`,
      'SSE streams': clients.length,
      'logged events (all users)': logged,
      'SSE events missing / duplicated (goal 0/0)': `${sum((a) => a.missing.length)} / ${sum((a) => a.duplicated)}`,
      'SSE elided (deleted since) / resyncs / reconnects': `${sum((a) => a.elided)} / ${audits.filter((a) => a.client.resyncs > 0).length} / ${sum((a) => a.client.connects - 1)}`,
      'chat sockets: opens / closes by code': `${chats.reduce((s, c) => s + c.opens, 0)} / ${[...chatCloses].map(([c, n]) => `${c}×${n}`).join(' ') || 'none'}`,
      'chat frames sent / new_message received / error codes': `${chats.reduce((s, c) => s + c.sent, 0)} / ${chats.reduce((s, c) => s + c.received, 0)} / ${[...chatErrors].map(([c, n]) => `${c}×${n}`).join(' ') || 'none'}`,
      ...phases,
      'load average at start': startLoad,
    };
    printTable(
      Object.entries(row).map(([figure, value]) => ({ figure, value })),
      `fault-run: 2 instances, ${USERS} users × ${DEVICES} SSE streams, ${CHAT} chat sockets, ${RATE} req/s`,
    );
    console.log(`HTTP outcomes: ${[...tally.statuses].map(([k, v]) => `${k}×${v}`).join(', ')}`);
    console.log(`failures by phase: ${[...tally.byPhase].map(([k, v]) => `${k}×${v}`).join(', ')}`);
    for (const c of crashes) console.log(`crash: ${c}`);
    for (const e of tally.examples) console.log(`bad request: ${e}`);
    for (let i = 0; i < size; i++) {
      const errors = cluster.logs(i).filter((l) => /"level":(50|60)/.test(l));
      console.log(`instance ${i}: ${errors.length} error-level log lines`);
      for (const line of errors.slice(0, 3)) console.log(`  ${line.slice(0, 400)}`);
    }
  } finally {
    for (const c of clients) c.stop();
    for (const c of chats) c.stop();
    await setup.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
