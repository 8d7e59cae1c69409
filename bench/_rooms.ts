// Shared by the chat-room benchmarks (chat-rooms, chat-big-room, chat-room-memory): users, sessions, rooms and
// memberships seeded in SQL, WebSocket clients that speak §6.1, discarding clients on a worker thread that
// subscribe and count bytes, and readings of the instances' /metrics.
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import {
  CLUSTER_ORIGIN,
  createVerifiedUserOn,
  TEST_AUTH_SECRET,
  type TestCluster,
} from '@herald/server/testkit';
import pg from 'pg';
import WebSocket from 'ws';

export const METRICS_KEY = 'bench-metrics-key-bench-metrics-key-0123';

const SESSION_TTL_MS = 7 * 24 * 3600 * 1000;

/**
 * Signs a session token the way better-auth signs its cookie (HMAC-SHA256 with the secret, base64), so a session
 * row inserted in SQL authenticates like one made by a sign-in; `seedUsers` checks this against a real sign-in.
 */
function signToken(token: string): string {
  return `${token}.${createHmac('sha256', TEST_AUTH_SECRET).update(token).digest('base64')}`;
}

export interface SeededUsers {
  ids: string[];
  cookies: string[];
}

/** Runs `rows` through `insert` in chunks (one statement per chunk keeps the parameter arrays small). */
async function chunked<T>(rows: T[], size: number, insert: (chunk: T[]) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < rows.length; i += size) await insert(rows.slice(i, i + size));
}

/**
 * Verified users with one session each, inserted in SQL: thousands of scrypt sign-ins would take minutes of the
 * same 2 cores the benchmark measures. One user signs up and in through the real endpoints first, and its cookie
 * must come out of the same signing as the seeded ones (otherwise the cookie format changed: fail loudly).
 */
export async function seedUsers(
  cluster: TestCluster,
  db: pg.Client,
  tag: string,
  count: number,
): Promise<SeededUsers & { cookieName: string }> {
  const real = await createVerifiedUserOn(cluster, 0, { name: `${tag} probe` });
  const eq = real.cookie.indexOf('=');
  const cookieName = real.cookie.slice(0, eq);
  const value = decodeURIComponent(real.cookie.slice(eq + 1).split(';')[0] ?? '');
  const { rows } = await db.query<{ token: string }>(
    'select token from session where user_id = $1 order by created_at desc limit 1',
    [real.id],
  );
  if (!rows[0] || signToken(rows[0].token) !== value) {
    throw new Error(
      'the session cookie is not signed the way the benchmark signs it; update bench/_rooms.ts',
    );
  }
  const ids = Array.from({ length: count }, (_, i) => `${tag}-${String(i).padStart(6, '0')}`);
  const tokens = ids.map(() => randomBytes(24).toString('base64url'));
  await chunked(ids, 5000, (chunk) =>
    db.query(
      `insert into "user" (id, name, email, email_verified, created_at, updated_at)
       select id, 'Bench ' || id, id || '@example.test', true, now(), now() from unnest($1::text[]) as t(id)`,
      [chunk],
    ),
  );
  const expires = new Date(Date.now() + SESSION_TTL_MS).toISOString();
  await chunked(
    ids.map((id, i) => [id, tokens[i] ?? ''] as const),
    5000,
    (chunk) =>
      db.query(
        `insert into session (id, token, user_id, expires_at, created_at, updated_at)
         select 'sess-' || u, t, u, $3::timestamptz, now(), now()
         from unnest($1::text[], $2::text[]) as x(u, t)`,
        [chunk.map((c) => c[0]), chunk.map((c) => c[1]), expires],
      ),
  );
  const cookies = tokens.map((t) => `${cookieName}=${encodeURIComponent(signToken(t))}`);
  return { ids, cookies, cookieName };
}

export interface SeededRoom {
  id: string;
  /** Member user ids; the first is the owner. */
  members: string[];
}

/**
 * Rooms and memberships in SQL, as the rooms repository leaves them: `member_count` equal to the member rows, the
 * owner with role `owner`, `last_read_seq` at the room's (empty) head, seq and rev counters at 0.
 */
export async function seedRooms(
  db: pg.Client,
  kind: 'public' | 'private',
  memberLists: string[][],
): Promise<SeededRoom[]> {
  const rooms = memberLists.map((members) => ({ id: randomUUID(), members }));
  await chunked(rooms, 5000, (chunk) =>
    db.query(
      `insert into chat_room (id, kind, name, created_by, member_count)
       select id, $3, 'Bench room ' || left(id, 8), owner, n
       from unnest($1::text[], $2::text[], $4::int[]) as r(id, owner, n)`,
      [
        chunk.map((r) => r.id),
        chunk.map((r) => r.members[0] ?? null),
        kind,
        chunk.map((r) => r.members.length),
      ],
    ),
  );
  const rows = rooms.flatMap((r) =>
    r.members.map((u, k) => [r.id, u, k === 0 ? 'owner' : 'member'] as const),
  );
  await chunked(rows, 20_000, (chunk) =>
    db.query(
      `insert into chat_member (room_id, user_id, role, last_read_seq)
       select r, u, role, 0 from unnest($1::text[], $2::text[], $3::text[]) as m(r, u, role)`,
      [chunk.map((c) => c[0]), chunk.map((c) => c[1]), chunk.map((c) => c[2])],
    ),
  );
  await db.query('analyze chat_room; analyze chat_member; analyze "user"; analyze session');
  return rooms;
}

export async function openDb(cluster: TestCluster): Promise<pg.Client> {
  const db = new pg.Client({ connectionString: cluster.db.url });
  await db.connect();
  return db;
}

/** A parsed §6.1 frame, loosely typed: the benchmark reads a few fields. */
export interface Frame {
  type: string;
  roomId?: string;
  lastSeq?: number;
  code?: string;
  message?: { seq: number; roomId: string; clientMessageId?: string };
}

/** A `ws` client in the §6.1 dialect (`?rooms=1`), authenticated by `cookie`. */
export function connectRooms(port: number, cookie: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/chat?rooms=1`, {
      headers: { origin: CLUSTER_ORIGIN, cookie },
      perMessageDeflate: false,
      skipUTF8Validation: true,
    });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
}

/**
 * Subscribes `ws` to `roomIds`, at most `window` requests in flight (the server answers TOO_MANY_REQUESTS past
 * 16 per socket); resolves with each room's `lastSeq` from its `subscribed` frame.
 */
export function subscribeAll(ws: WebSocket, roomIds: string[], window = 8): Promise<Map<string, number>> {
  return new Promise((resolve, reject) => {
    const heads = new Map<string, number>();
    let next = 0;
    const sendNext = () => {
      const roomId = roomIds[next++];
      if (roomId !== undefined) ws.send(JSON.stringify({ type: 'subscribe', roomId }));
    };
    const onMessage = (data: WebSocket.RawData) => {
      const f = JSON.parse(String(data)) as Frame;
      if (f.type === 'subscribed' && f.roomId) {
        heads.set(f.roomId, f.lastSeq ?? 0);
        if (heads.size === roomIds.length) {
          ws.off('message', onMessage);
          resolve(heads);
        } else sendNext();
      } else if (f.type === 'error') {
        ws.off('message', onMessage);
        reject(new Error(`subscribe refused: ${f.code} (${f.roomId})`));
      }
    };
    ws.on('message', onMessage);
    if (roomIds.length === 0) resolve(heads);
    for (let i = 0; i < Math.min(window, roomIds.length); i++) sendNext();
  });
}

/** Runs `task(i)` for i in [0, count) with at most `limit` in flight. */
export async function pool(count: number, limit: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker));
}

export interface MetricsReading {
  published: number;
  received: number;
}

export async function busCounters(cluster: TestCluster, i: number): Promise<MetricsReading> {
  const res = await fetch(`${cluster.url(i)}/metrics`, {
    headers: { authorization: `Bearer ${METRICS_KEY}` },
  });
  const m = (await res.json()) as { pubsub: { messagesPublished: number; messagesReceived: number } };
  return { published: m.pubsub.messagesPublished, received: m.pubsub.messagesReceived };
}

/** One value of an instance's Prometheus text (first series of that name), or NaN. */
export async function promValue(cluster: TestCluster, i: number, name: string): Promise<number> {
  const res = await fetch(`${cluster.url(i)}/metrics?format=prometheus`, {
    headers: { authorization: `Bearer ${METRICS_KEY}` },
  });
  const line = (await res.text())
    .split('\n')
    .find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : Number.NaN;
}

// Plain JavaScript, so the worker needs no TypeScript loader. Each socket upgrades with its own cookie, sends
// its subscribe frames (masked with a zero key: XOR with 0 leaves the payload as it is, and the protocol allows
// any key), waits for as many `subscribed` frames, then only counts the bytes it reads into one shared scratch
// buffer (`onread`), so the server does the full work for it while this thread parses nothing.
const SUBSCRIBER_WORKER = `
const net = require('node:net');
const { randomBytes } = require('node:crypto');
const { parentPort } = require('node:worker_threads');
const scratch = Buffer.allocUnsafe(65536);
const sockets = [];
let bytes = 0;
function frame(text) {
  const p = Buffer.from(text);
  let h;
  if (p.length < 126) h = Buffer.from([0x81, 0x80 | p.length]);
  else { h = Buffer.alloc(4); h[0] = 0x81; h[1] = 0x80 | 126; h.writeUInt16BE(p.length, 2); }
  return Buffer.concat([h, Buffer.alloc(4), p]);
}
const MARK = '"type":"subscribed"';
function open(port, origin, cookie, roomIds) {
  return new Promise((resolve, reject) => {
    let text = '';
    let upgraded = false;
    let live = false;
    let subscribed = 0;
    const socket = net.connect(
      { port, host: '127.0.0.1', onread: { buffer: scratch, callback(n, buf) {
        if (live) { bytes += n; return; }
        text += buf.toString('latin1', 0, n);
        if (!upgraded) {
          const end = text.indexOf('\\r\\n\\r\\n');
          if (end < 0) return;
          if (!text.startsWith('HTTP/1.1 101')) {
            socket.destroy();
            reject(new Error('upgrade refused: ' + text.split('\\r\\n')[0]));
            return;
          }
          upgraded = true;
          text = text.slice(end + 4);
          for (const roomId of roomIds) socket.write(frame(JSON.stringify({ type: 'subscribe', roomId })));
        }
        let at = text.indexOf(MARK);
        while (at >= 0) { subscribed++; text = text.slice(at + MARK.length); at = text.indexOf(MARK); }
        if (text.includes('"type":"error"')) { reject(new Error('subscribe refused: ' + text.slice(0, 200))); return; }
        text = text.slice(-MARK.length);
        if (subscribed >= roomIds.length) { live = true; text = ''; resolve(socket); }
      } } },
      () => socket.write(
        'GET /chat?rooms=1 HTTP/1.1\\r\\nHost: 127.0.0.1:' + port + '\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n' +
        'Sec-WebSocket-Key: ' + randomBytes(16).toString('base64') + '\\r\\nSec-WebSocket-Version: 13\\r\\n' +
        'Origin: ' + origin + '\\r\\nCookie: ' + cookie + '\\r\\n\\r\\n'),
    );
    socket.once('error', reject);
    socket.on('error', () => {});
  });
}
parentPort.on('message', async (msg) => {
  if (msg.type === 'close') {
    for (const s of sockets) s.destroy();
    parentPort.postMessage({ type: 'closed' });
    return;
  }
  if (msg.type === 'bytes') {
    parentPort.postMessage({ type: 'bytes', bytes });
    return;
  }
  try {
    for (let i = 0; i < msg.clients.length; i += 50) {
      const batch = msg.clients.slice(i, i + 50).map((c) => open(c.port, msg.origin, c.cookie, c.roomIds));
      sockets.push(...(await Promise.all(batch)));
    }
    parentPort.postMessage({ type: 'opened' });
  } catch (err) {
    parentPort.postMessage({ type: 'error', message: String(err) });
  }
});
`;

export interface SubscriberSpec {
  port: number;
  cookie: string;
  roomIds: string[];
}

/** Subscribed clients that read and discard on a worker thread; `bytes()` says how much they have read. */
export class SubscriberPool {
  private readonly worker = new Worker(SUBSCRIBER_WORKER, { eval: true });
  private ask<T>(message: unknown): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.worker.once('message', (reply: { type: string; message?: string }) =>
        reply.type === 'error' ? reject(new Error(reply.message)) : resolve(reply as T),
      );
      this.worker.postMessage(message);
    });
  }
  async open(clients: SubscriberSpec[]): Promise<void> {
    if (clients.length > 0) await this.ask({ type: 'open', clients, origin: CLUSTER_ORIGIN });
  }
  async bytes(): Promise<number> {
    return (await this.ask<{ bytes: number }>({ type: 'bytes' })).bytes;
  }
  async close(): Promise<void> {
    await this.ask({ type: 'close' });
    await this.worker.terminate();
  }
}

/** Deterministic pseudo-random numbers (mulberry32): the same seed lays out the same rooms on every run. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Totals = Map<string, { sum: number; count: number }>;

/** Sum and count per label set of a histogram, from an instance's Prometheus text. */
export async function histogramTotals(cluster: TestCluster, i: number, name: string): Promise<Totals> {
  const res = await fetch(`${cluster.url(i)}/metrics?format=prometheus`, {
    headers: { authorization: `Bearer ${METRICS_KEY}` },
  });
  const totals: Totals = new Map();
  const series = new RegExp(`^${name}_(sum|count)(?:\\{([^}]*)\\})? (\\S+)$`);
  for (const line of (await res.text()).split('\n')) {
    const m = series.exec(line);
    if (!m) continue;
    const label = /stage="([^"]+)"/.exec(m[2] ?? '')?.[1] ?? 'all';
    const t = totals.get(label) ?? { sum: 0, count: 0 };
    if (m[1] === 'sum') t.sum = Number(m[3]);
    else t.count = Number(m[3]);
    totals.set(label, t);
  }
  return totals;
}

/** The server-side stages of a run: sends (queued, checks, store), the bus hop, the fan-out to local sockets. */
export const STAGE_HISTOGRAMS = [
  'herald_chat_send_stage_seconds',
  'herald_pubsub_latency_seconds',
  'herald_chat_fanout_duration_seconds',
] as const;

export function readStages(cluster: TestCluster, instances: number): Promise<Totals[][]> {
  return Promise.all(
    STAGE_HISTOGRAMS.map((name) =>
      Promise.all(Array.from({ length: instances }, (_, k) => histogramTotals(cluster, k, name))),
    ),
  );
}

/** Mean per label (ms) between two readings of every instance, one line per histogram. */
export function describeStages(before: Totals[][], after: Totals[][]): string {
  return STAGE_HISTOGRAMS.map((name, h) => {
    const b = before[h] ?? [];
    const a = after[h] ?? [];
    const labels = new Set(a.flatMap((m) => [...m.keys()]));
    const parts = [...labels].map((label) => {
      let sum = 0;
      let count = 0;
      a.forEach((m, k) => {
        sum += (m.get(label)?.sum ?? 0) - (b[k]?.get(label)?.sum ?? 0);
        count += (m.get(label)?.count ?? 0) - (b[k]?.get(label)?.count ?? 0);
      });
      return `${label} ${count ? ((sum / count) * 1000).toFixed(2) : 'n/a'} ms (${count})`;
    });
    return `${name.replace(/^herald_|_seconds$/g, '')}: ${parts.join(', ')}`;
  }).join('; ');
}
