// Shared machinery of the fault benchmarks (fault-redis-outage, fault-rolling-restart, fault-concurrent-sends):
// a real cluster (server processes + private redis-server, as the tests start it), seeded users with real
// sessions, SSE "devices" that reconnect with Last-Event-ID like EventSource does and keep a model built only
// from events, a steady mixed load from random instances, and the exact accounting of logged-event ids.
//
// Accounting per client (a stream that reconnects keeps one identity): the logged ids it received must be
// exactly the ids from its first `connected` cursor + 1 to the user's final seq (PostgreSQL notification_cursor).
//   missing    = expected ids never received (ranges a `resync: true` connect skipped are not expected);
//   elided     = missing ids whose log row names a notification deleted since: replay and gap repair skip those
//                by design (stream.ts: "a notification deleted since is skipped"), so they are counted apart;
//   duplicated = receipts beyond the first of one id; out of order = an id not above the previous one.
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import {
  CLUSTER_ORIGIN,
  createVerifiedUserOn,
  parseFrame,
  type SseEvent,
  startCluster,
  type TestCluster,
} from '@herald/server/testkit';
import pg from 'pg';
import { numberArg, ONE_ADDRESS_LIMITS, percentile, printTable, signIn } from './_lib.js';

export const LOGGED = new Set([
  'new_notification',
  'notification_updated',
  'notification_deleted',
  'notifications_cleared',
  'unread_count_changed',
]);
const PASSWORD = 'correct horse battery staple';
const ADMIN_EMAIL = 'fault-admin@example.test';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface BenchUser {
  index: number;
  id: string;
  email: string;
  cookie: string;
}

export interface FaultSetup {
  cluster: TestCluster;
  db: pg.Client;
  adminCookie: string;
  users: BenchUser[];
  close(): Promise<void>;
}

/** Runs `task(i)` for i in [0, count) with at most `limit` in flight. */
export async function pool(count: number, limit: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker));
}

/**
 * Starts `instances` server processes and `userCount` users with one real session each (signed in through
 * the real endpoint, alternating instances). The admin signs up and verifies through the real endpoints and
 * is promoted by ADMIN_EMAILS; the other accounts are inserted with the admin's password hash (as sse-fanout
 * does) so the seed costs no scrypt work besides the sign-ins.
 */
export async function setupFault(opts: {
  instances: number;
  users: number;
  env?: Record<string, string>;
}): Promise<FaultSetup> {
  const cluster = await startCluster({
    instances: opts.instances,
    env: {
      ...ONE_ADDRESS_LIMITS,
      LOG_LEVEL: 'warn',
      AUTH_RATE_LIMIT_MAX: '100000000',
      ADMIN_EMAILS: ADMIN_EMAIL,
      ...opts.env,
    },
  });
  const db = new pg.Client({ connectionString: cluster.db.url });
  try {
    await db.connect();
    const admin = await createVerifiedUserOn(cluster, 0, { email: ADMIN_EMAIL, password: PASSWORD });
    const account = await db.query<{ password: string; provider_id: string }>(
      'select password, provider_id from account where user_id = $1',
      [admin.id],
    );
    const real = account.rows[0];
    if (!real) throw new Error('admin has no credential account');
    const run = Date.now().toString(36);
    await db.query(
      `insert into "user" (id, name, email, email_verified, created_at, updated_at)
       select 'flt-' || $2 || '-' || g, 'Fault ' || g, 'flt' || g || '-' || $2 || '@example.test', true, now(), now()
       from generate_series(1, $1::int) g`,
      [opts.users, run],
    );
    await db.query(
      `insert into account (id, account_id, provider_id, user_id, password, created_at, updated_at)
       select 'flt-acc-' || $2 || '-' || g, 'flt-' || $2 || '-' || g, $3, 'flt-' || $2 || '-' || g, $4, now(), now()
       from generate_series(1, $1::int) g`,
      [opts.users, run, real.provider_id, real.password],
    );
    const users: BenchUser[] = new Array(opts.users);
    await pool(opts.users, 8, async (i) => {
      const email = `flt${i + 1}-${run}@example.test`;
      users[i] = {
        index: i,
        id: `flt-${run}-${i + 1}`,
        email,
        cookie: await signIn(cluster.url(i % opts.instances), email, PASSWORD),
      };
    });
    return {
      cluster,
      db,
      adminCookie: admin.cookie,
      users,
      async close() {
        await db.end().catch(() => {});
        await cluster.close();
      },
    };
  } catch (err) {
    await db.end().catch(() => {});
    await cluster.close();
    throw err;
  }
}

type Model = Map<string, boolean>; // notification id → read

/** One device: an SSE stream that reconnects with Last-Event-ID to its home instance, else to the others. */
export class FaultClient {
  /** Cursor of the first `connected`; expected logged ids start after it. */
  firstId: number | undefined;
  /** What an EventSource would send as Last-Event-ID (the last id seen, also on connected/keep_alive). */
  lastId: string | undefined;
  /** Highest id seen (any event) and when each logged id first arrived. */
  maxId = -1;
  readonly counts = new Map<number, number>();
  readonly idLog: number[] = [];
  readonly arrivals: Array<{ at: number; id: number }> = [];
  /** Title and arrival time of every new_notification, in order (duplicates included). */
  readonly titles: Array<{ at: number; title: string }> = [];
  /** (from, to]: ids a resync connect told the client it will not get (it refetched instead). */
  readonly skipped: Array<[number, number]> = [];
  outOfOrder = 0;
  resyncs = 0;
  connects = 0;
  failedAttempts = 0;
  replayed = 0;
  freshReconnects = 0;
  readonly endCodes = new Map<string, number>();
  readonly instancesUsed: number[] = [];
  live = false;
  notes: Model = new Map();
  unread = 0;
  private refetching: SseEvent[] | null = null;
  private req: http.ClientRequest | undefined;
  private closing = false;
  private attempt = 0;
  private lastByteAt = 0;
  private watchdog: NodeJS.Timeout | undefined;
  private firstConnected: (() => void) | undefined;

  constructor(
    readonly user: BenchUser,
    readonly home: number,
    private readonly cluster: TestCluster,
    private readonly stallMs: number,
  ) {}

  /** Opens the first stream; resolves on its `connected`. */
  start(): Promise<void> {
    const ready = new Promise<void>((resolve) => {
      this.firstConnected = resolve;
    });
    this.connect(this.home);
    this.watchdog = setInterval(() => {
      // A stream silent for several keep-alive intervals is dead (a client would do the same).
      if (this.live && performance.now() - this.lastByteAt > this.stallMs) this.req?.destroy();
    }, 500);
    return ready;
  }

  stop() {
    this.closing = true;
    clearInterval(this.watchdog);
    this.req?.destroy();
  }

  private scheduleReconnect() {
    if (this.closing) return;
    this.live = false;
    const attempt = this.attempt++;
    const backoff = Math.min(1_000, 100 * 2 ** Math.min(attempt, 4)) + Math.random() * 100;
    // First attempt goes home; later ones rotate through the other instances.
    const instance = (this.home + attempt) % this.cluster.size;
    setTimeout(() => this.connect(instance), backoff);
  }

  private connect(instance: number) {
    if (this.closing) return;
    const headers: Record<string, string> = { accept: 'text/event-stream', cookie: this.user.cookie };
    if (this.lastId !== undefined && this.lastId !== '') headers['last-event-id'] = this.lastId;
    else if (this.firstId !== undefined) this.freshReconnects++;
    let done = false;
    const fail = () => {
      if (done) return;
      done = true;
      this.scheduleReconnect();
    };
    const req = http.get(
      {
        host: '127.0.0.1',
        port: this.cluster.port(instance),
        path: '/notification/stream',
        headers,
        agent: false,
      },
      (res) => {
        if (res.statusCode !== 200) {
          this.failedAttempts++;
          res.resume();
          res.on('end', fail);
          res.on('error', fail);
          return;
        }
        this.lastByteAt = performance.now();
        res.setEncoding('utf8');
        let buffer = '';
        res.on('data', (chunk: string) => {
          this.lastByteAt = performance.now();
          buffer += chunk;
          let idx = buffer.indexOf('\n\n');
          while (idx >= 0) {
            const frame = buffer.slice(0, idx);
            buffer = buffer.slice(idx + 2);
            const ev = parseFrame(frame);
            if (ev) this.onEvent(ev, instance);
            idx = buffer.indexOf('\n\n');
          }
        });
        res.on('close', fail);
        res.on('error', fail);
      },
    );
    req.on('error', () => {
      this.failedAttempts++;
      fail();
    });
    this.req = req;
  }

  private onEvent(ev: SseEvent, instance: number) {
    const now = performance.now();
    if (ev.id !== undefined) this.lastId = ev.id; // an empty id resets it, as in EventSource
    const id = ev.id === undefined || ev.id === '' ? Number.NaN : Number(ev.id);
    if (id > this.maxId) this.maxId = id;
    if (ev.event === 'connected') {
      this.live = true;
      this.attempt = 0;
      this.connects++;
      this.instancesUsed.push(instance);
      const data = ev.data as { unreadCount: number; resumed: boolean; replayed: number; resync: boolean };
      this.replayed += data.replayed ?? 0;
      if (this.firstId === undefined) {
        this.firstId = id;
        this.unread = data.unreadCount;
        this.firstConnected?.();
      } else if (data.resync) {
        this.resyncs++;
        const from = this.idLog.at(-1) ?? this.firstId;
        this.skipped.push([from, id]);
        void this.refetch(instance, id);
      }
      this.arrivals.push({ at: now, id });
      return;
    }
    if (ev.event === 'error') {
      const code = String(ev.data.code);
      this.endCodes.set(code, (this.endCodes.get(code) ?? 0) + 1);
      return;
    }
    if (!LOGGED.has(ev.event)) {
      if (Number.isFinite(id)) this.arrivals.push({ at: now, id });
      return;
    }
    const prev = this.idLog.at(-1);
    if (prev !== undefined && id <= prev) this.outOfOrder++;
    this.idLog.push(id);
    this.counts.set(id, (this.counts.get(id) ?? 0) + 1);
    this.arrivals.push({ at: now, id });
    if (ev.event === 'new_notification') {
      this.titles.push({ at: now, title: String((ev.data.notification as { title: string }).title) });
    }
    if (this.refetching) this.refetching.push(ev);
    else this.apply(ev);
  }

  private apply(ev: SseEvent) {
    const d = ev.data;
    if (ev.event === 'new_notification' || ev.event === 'notification_updated') {
      const n = d.notification as { id: string; read: boolean };
      this.notes.set(n.id, n.read);
    } else if (ev.event === 'notification_deleted') this.notes.delete(String(d.notificationId));
    else if (ev.event === 'notifications_cleared') this.notes.clear();
    else if (ev.event === 'unread_count_changed') this.unread = Number(d.unreadCount);
  }

  /** After `resync: true`: refetch list and count, then apply what arrived meanwhile. */
  private async refetch(instance: number, _cursor: number) {
    this.refetching = [];
    try {
      const snapshot = await fetchServerModel(this.cluster, instance, this.user.cookie);
      this.notes = snapshot.notes;
      this.unread = snapshot.unread;
    } catch {
      // keep the old model; the mismatch check will show it
    }
    const pending = this.refetching ?? [];
    this.refetching = null;
    for (const ev of pending) this.apply(ev);
  }

  /** Time (performance.now) at which this client first saw an id ≥ seq, or NaN. */
  reachedAt(seq: number): number {
    return this.arrivals.find((a) => a.id >= seq)?.at ?? Number.NaN;
  }
}

/** The server's view of a user: every notification (all pages) and the unread count. */
export async function fetchServerModel(
  cluster: TestCluster,
  instance: number,
  cookie: string,
): Promise<{ notes: Model; unread: number }> {
  const base = cluster.url(instance);
  const notes: Model = new Map();
  for (let page = 1; page <= 50; page++) {
    const res = await fetch(`${base}/notification/list?limit=100&page=${page}`, { headers: { cookie } });
    if (res.status !== 200) throw new Error(`list: ${res.status}`);
    const body = (await res.json()) as {
      notifications: Array<{ id: string; read: boolean }>;
      pagination: { hasNextPage: boolean };
    };
    for (const n of body.notifications) notes.set(n.id, n.read);
    if (!body.pagination.hasNextPage) break;
  }
  const res = await fetch(`${base}/notification/unread-count`, { headers: { cookie } });
  if (res.status !== 200) throw new Error(`unread-count: ${res.status}`);
  return { notes, unread: ((await res.json()) as { unreadCount: number }).unreadCount };
}

export interface LoadStats {
  ops: Record<'create' | 'read' | 'unread' | 'delete', number>;
  notFound: number;
  retried: number;
  failed: number;
  failures: string[];
}

/**
 * A steady mixed load (creates through the admin send, read/unread toggles and deletes by the users
 * themselves) at `rate` operations per second, at most `concurrency` in flight, each on a random instance;
 * a request refused by a stopped or stopping instance is retried on another (sends carry an Idempotency-Key,
 * so a retry never sends twice). Read and delete targets come from the user's first device's model.
 */
export function startLoad(opts: {
  setup: FaultSetup;
  clientsByUser: FaultClient[][];
  rate: number;
  concurrency: number;
}): { stop(): Promise<void>; stats: LoadStats } {
  const { setup } = opts;
  const { cluster } = setup;
  const stats: LoadStats = {
    ops: { create: 0, read: 0, unread: 0, delete: 0 },
    notFound: 0,
    retried: 0,
    failed: 0,
    failures: [],
  };
  let inFlight = 0;
  let seq = 0;
  let stopped = false;
  const pending = new Set<Promise<void>>();

  const request = async (method: string, path: string, cookie: string, body?: unknown, key?: string) => {
    let last = '';
    const first = Math.floor(Math.random() * cluster.size);
    for (let attempt = 0; attempt < 6; attempt++) {
      const instance = (first + attempt) % cluster.size;
      if (attempt > 0) {
        stats.retried++;
        await sleep(150);
      }
      try {
        const headers: Record<string, string> = { origin: CLUSTER_ORIGIN, cookie };
        if (body !== undefined) headers['content-type'] = 'application/json';
        if (key) headers['idempotency-key'] = key;
        const res = await fetch(`${cluster.url(instance)}${path}`, {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(10_000),
        });
        const text = await res.text();
        if (res.status === 200 || res.status === 404) return res.status;
        last = `${method} ${path} → ${res.status} ${text.slice(0, 120)}`;
        if (res.status < 500 && res.status !== 429) break;
      } catch (err) {
        last = `${method} ${path} → ${err instanceof Error ? err.message : String(err)}`;
      }
    }
    stats.failed++;
    if (stats.failures.length < 5) stats.failures.push(last);
    return 0;
  };

  const op = async () => {
    const users = setup.users;
    const user = users[Math.floor(Math.random() * users.length)];
    if (!user) return;
    const model = opts.clientsByUser[user.index]?.[0]?.notes;
    const ids = model ? [...model.keys()] : [];
    const r = Math.random();
    if (r < 0.5 || ids.length === 0) {
      const n = seq++;
      const status = await request(
        'POST',
        '/admin/notifications/send',
        setup.adminCookie,
        {
          target: { scope: 'user', identifier: user.id },
          notification: {
            type: 'info',
            title: `fault load ${n}`,
            content: `notification ${n} of the fault run`,
          },
        },
        `fault-${process.pid}-${n}`,
      );
      if (status === 200) stats.ops.create++;
      return;
    }
    const target = ids[Math.floor(Math.random() * ids.length)] ?? '';
    if (r < 0.82) {
      const read = !(model?.get(target) ?? false);
      const status = await request('PATCH', `/notification/${target}/read`, user.cookie, { read });
      if (status === 200) stats.ops[read ? 'read' : 'unread']++;
      else if (status === 404) stats.notFound++;
    } else {
      const status = await request('DELETE', `/notification/${target}`, user.cookie);
      if (status === 200) stats.ops.delete++;
      else if (status === 404) stats.notFound++;
    }
  };

  const interval = 1000 / opts.rate;
  const ticker = setInterval(() => {
    if (stopped || inFlight >= opts.concurrency) return;
    inFlight++;
    const p = op()
      .catch(() => {
        stats.failed++;
      })
      .finally(() => {
        inFlight--;
        pending.delete(p);
      });
    pending.add(p);
  }, interval);

  return {
    stats,
    async stop() {
      stopped = true;
      clearInterval(ticker);
      await Promise.allSettled([...pending]);
    },
  };
}

/** Opens `perUser` devices for every user, device k of user u homed on instance (u + k) % instances. */
export async function openClients(
  setup: FaultSetup,
  perUser: number,
  stallMs: number,
): Promise<{ clients: FaultClient[]; byUser: FaultClient[][] }> {
  const byUser: FaultClient[][] = setup.users.map(() => []);
  const clients: FaultClient[] = [];
  for (const user of setup.users) {
    for (let k = 0; k < perUser; k++) {
      const c = new FaultClient(user, (user.index + k) % setup.cluster.size, setup.cluster, stallMs);
      byUser[user.index]?.push(c);
      clients.push(c);
    }
  }
  await pool(clients.length, 50, (i) => clients[i]?.start() ?? Promise.resolve());
  return { clients, byUser };
}

/** Final seq of each user, from PostgreSQL (0 when nothing was ever logged). */
export async function finalSeqs(db: pg.Client, userIds: string[]): Promise<Map<string, number>> {
  const { rows } = await db.query<{ user_id: string; last_seq: string }>(
    'select user_id, last_seq::text as last_seq from notification_cursor where user_id = any($1)',
    [userIds],
  );
  const map = new Map(userIds.map((id) => [id, 0]));
  for (const r of rows) map.set(r.user_id, Number(r.last_seq));
  return map;
}

/** Waits until every client has seen its user's final seq; returns false on timeout. */
export async function waitConverged(
  clients: FaultClient[],
  finals: Map<string, number>,
  timeoutMs: number,
): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (clients.every((c) => c.live && c.maxId >= (finals.get(c.user.id) ?? 0))) return true;
    await sleep(100);
  }
  return false;
}

export interface ClientAudit {
  client: FaultClient;
  expected: number;
  missing: number[];
  elided: number;
  elidedIds: number[];
  duplicated: number;
  unexpected: number;
}

/** Missing / elided / duplicated ids of every client (see the header). */
export async function audit(
  db: pg.Client,
  clients: FaultClient[],
  finals: Map<string, number>,
): Promise<ClientAudit[]> {
  const out: ClientAudit[] = [];
  for (const c of clients) {
    const final = finals.get(c.user.id) ?? 0;
    const from = c.firstId ?? 0;
    const missing: number[] = [];
    let expected = 0;
    for (let s = from + 1; s <= final; s++) {
      if (c.skipped.some(([a, b]) => s > a && s <= b)) continue;
      expected++;
      if (!c.counts.has(s)) missing.push(s);
    }
    let duplicated = 0;
    let unexpected = 0;
    for (const [id, n] of c.counts) {
      if (n > 1) duplicated += n - 1;
      if (id <= from || id > final) unexpected += n;
    }
    out.push({ client: c, expected, missing, elided: 0, elidedIds: [], duplicated, unexpected });
  }
  // Which missing ids name a notification that no longer exists (skipped by design in replay/repair)?
  const byUser = new Map<string, Set<number>>();
  for (const a of out) {
    const set = byUser.get(a.client.user.id) ?? new Set<number>();
    for (const s of a.missing) set.add(s);
    byUser.set(a.client.user.id, set);
  }
  const elidedByUser = new Map<string, Set<number>>();
  for (const [userId, seqs] of byUser) {
    if (seqs.size === 0) continue;
    const { rows } = await db.query<{ seq: string }>(
      `select e.seq::text as seq from notification_event e left join notification n on n.id = e.notification_id
       where e.user_id = $1 and e.seq = any($2::bigint[]) and e.notification_id is not null and n.id is null`,
      [userId, [...seqs]],
    );
    elidedByUser.set(userId, new Set(rows.map((r) => Number(r.seq))));
  }
  for (const a of out) {
    const elided = elidedByUser.get(a.client.user.id);
    if (!elided) continue;
    const real = a.missing.filter((s) => !elided.has(s));
    a.elided = a.missing.length - real.length;
    a.elidedIds = a.missing.filter((s) => elided.has(s));
    a.missing = real;
  }
  return out;
}

/** Compares the event-built model of every device of `sample` users with the server's list and count. */
export async function checkModels(
  setup: FaultSetup,
  byUser: FaultClient[][],
  sample: number,
): Promise<{ users: number; streams: number; mismatches: number; examples: string[] }> {
  const picked = setup.users.slice(0, Math.min(sample, setup.users.length));
  let streams = 0;
  let mismatches = 0;
  const examples: string[] = [];
  for (const user of picked) {
    const server = await fetchServerModel(setup.cluster, user.index % setup.cluster.size, user.cookie);
    for (const c of byUser[user.index] ?? []) {
      streams++;
      const diffs: string[] = [];
      if (c.unread !== server.unread) diffs.push(`unread ${c.unread} vs server ${server.unread}`);
      for (const [id, read] of server.notes) {
        const mine = c.notes.get(id);
        if (mine === undefined) diffs.push(`lacks ${id}`);
        else if (mine !== read) diffs.push(`${id} read=${mine} vs ${read}`);
      }
      for (const id of c.notes.keys()) if (!server.notes.has(id)) diffs.push(`extra ${id}`);
      if (diffs.length > 0) {
        mismatches++;
        if (examples.length < 3)
          examples.push(`${user.id} (home ${c.home}): ${diffs.slice(0, 4).join('; ')}`);
      }
    }
  }
  return { users: picked.length, streams, mismatches, examples };
}

export const fmtMs = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : 'n/a');

/** The summary table of a fault run, plus the details of the first affected clients. */
export function report(opts: {
  title: string;
  audits: ClientAudit[];
  load: LoadStats;
  loggedEvents: number;
  timings: Record<string, string>;
  models: { users: number; streams: number; mismatches: number; examples: string[] };
  converged: boolean;
  cluster: TestCluster;
  logFrom: number[];
}) {
  const { audits } = opts;
  const sum = (f: (a: ClientAudit) => number) => audits.reduce((n, a) => n + f(a), 0);
  const max = (f: (a: ClientAudit) => number) => audits.reduce((n, a) => Math.max(n, f(a)), 0);
  const codes = new Map<string, number>();
  for (const a of audits) for (const [k, v] of a.client.endCodes) codes.set(k, (codes.get(k) ?? 0) + v);
  const row: Record<string, string | number> = {
    clients: audits.length,
    'ops ok (create/read/unread/delete)': `${opts.load.ops.create}/${opts.load.ops.read}/${opts.load.ops.unread}/${opts.load.ops.delete}`,
    'ops 404 / retried / failed': `${opts.load.notFound} / ${opts.load.retried} / ${opts.load.failed}`,
    'logged events (all users)': opts.loggedEvents,
    'expected receipts': sum((a) => a.expected),
    'missing total / max per client': `${sum((a) => a.missing.length)} / ${max((a) => a.missing.length)}`,
    'duplicated total / max per client': `${sum((a) => a.duplicated)} / ${max((a) => a.duplicated)}`,
    'elided (deleted since) total / clients': `${sum((a) => a.elided)} / ${audits.filter((a) => a.elided > 0).length}`,
    'out of order': sum((a) => a.client.outOfOrder),
    'outside expected range': sum((a) => a.unexpected),
    'clients resynced': audits.filter((a) => a.client.resyncs > 0).length,
    'reconnects (fresh, no Last-Event-ID)': `${sum((a) => a.client.connects - 1)} (${sum((a) => a.client.freshReconnects)})`,
    'failed connect attempts': sum((a) => a.client.failedAttempts),
    'replayed events': sum((a) => a.client.replayed),
    'model mismatches (sample)': `${opts.models.mismatches} of ${opts.models.streams} streams (${opts.models.users} users)`,
    converged: opts.converged ? 'yes' : 'NO (timeout)',
    ...opts.timings,
  };
  console.log(`\n${opts.title}`);
  printTable(Object.entries(row).map(([figure, value]) => ({ figure, value })));
  if (codes.size > 0)
    console.log(`stream end codes: ${[...codes].map(([k, v]) => `${k} × ${v}`).join(', ')}`);
  if (opts.load.failures.length) console.log(`load failures (first): \n  ${opts.load.failures.join('\n  ')}`);
  for (const e of opts.models.examples) console.log(`model mismatch: ${e}`);
  const affected = audits.filter((a) => a.missing.length > 0 || a.duplicated > 0 || a.client.outOfOrder > 0);
  for (const a of affected.slice(0, 3)) {
    const c = a.client;
    console.log(
      `affected client ${c.user.id} home ${c.home} (instances ${c.instancesUsed.join('→')}): first id ${c.firstId}, ` +
        `final ${c.idLog.at(-1)}, missing [${a.missing.slice(0, 20).join(', ')}], ` +
        `duplicated ${a.duplicated}, ids received: ${c.idLog.join(',')}`,
    );
  }
  const withElided = audits.find((a) => a.elided > 0);
  if (withElided) {
    const c = withElided.client;
    const first = withElided.elidedIds[0] ?? 0;
    const near = c.idLog.filter((id) => Math.abs(id - first) <= 6);
    console.log(
      `example of elided ids (log rows of notifications deleted before the stream read them): client ` +
        `${c.user.id} home ${c.home}, elided [${withElided.elidedIds.join(', ')}], ids received near: ${near.join(',')}`,
    );
  }
  for (let i = 0; i < opts.cluster.size; i++) {
    const lines = opts.cluster.logs(i).slice(opts.logFrom[i] ?? 0);
    const byMsg = new Map<string, number>();
    for (const line of lines) {
      let msg = line.slice(0, 120);
      try {
        const parsed = JSON.parse(line) as { msg?: string; level?: number };
        msg = `[${parsed.level}] ${parsed.msg ?? msg}`;
      } catch {}
      byMsg.set(msg, (byMsg.get(msg) ?? 0) + 1);
    }
    console.log(`instance ${i} log lines (warn+) during the run: ${lines.length}`);
    for (const [msg, n] of [...byMsg].sort((a, b) => b[1] - a[1]).slice(0, 6)) console.log(`  ${n} × ${msg}`);
    for (const line of lines.filter((l) => /"level":(50|60)/.test(l)).slice(0, 2)) {
      console.log(`  error line: ${line.slice(0, 700)}`);
    }
  }
}

export { percentile };

/** Arguments every 3-instance fault scenario takes (`--users 100 --devices 3 --rate 30 …`). */
export function scenarioArgs() {
  return {
    users: numberArg('users', 100),
    devices: numberArg('devices', 3),
    rate: numberArg('rate', 30),
    concurrency: numberArg('concurrency', 16),
    warmupS: numberArg('warmup', 10),
    afterS: numberArg('after', 10),
    sample: numberArg('sample', 20),
    keepAliveMs: numberArg('keepalive-ms', 5000),
    convergeTimeoutMs: numberArg('converge-timeout-ms', 60_000),
  };
}
export type ScenarioArgs = ReturnType<typeof scenarioArgs>;

type Clients = Awaited<ReturnType<typeof openClients>>['clients'];

export interface Disruption {
  /** When the disruption ended: the `--after` seconds of load count from here. */
  endedAt: number;
  title: string;
  /** Timings for the report, given the moment every client reached its final seq. */
  timings(at: {
    finalAt: number;
    loadStoppedAt: number;
    /** Latest moment any client reached the given per-user seqs. */
    reached(seqs: Map<string, number>): number;
  }): Record<string, string>;
}

/**
 * The shared skeleton of a 3-instance fault scenario: cluster and users, U×D streams, `--warmup` s of load,
 * the disruption, `--after` s more load, then convergence, the audit of every client and the report.
 */
export async function runScenario(
  args: ScenarioArgs,
  describe: string,
  disrupt: (ctx: { setup: FaultSetup; clients: Clients; userIds: string[] }) => Promise<Disruption>,
): Promise<void> {
  console.log(`starting 3 instances (PostgreSQL + private redis-server), ${args.users} users…`);
  const setup = await setupFault({
    instances: 3,
    users: args.users,
    env: { SSE_KEEPALIVE_MS: String(args.keepAliveMs) },
  });
  const { cluster, db } = setup;
  let clients: Clients = [];
  try {
    const userIds = setup.users.map((u) => u.id);
    const initial = await finalSeqs(db, userIds);
    const opened = await openClients(setup, args.devices, args.keepAliveMs * 3 + 2_000);
    clients = opened.clients;
    const logFrom = [0, 1, 2].map((i) => cluster.logs(i).length);
    console.log(
      `${clients.length} streams open; load ${args.rate} ops/s for ${args.warmupS} s, then ${describe}…`,
    );
    const load = startLoad({
      setup,
      clientsByUser: opened.byUser,
      rate: args.rate,
      concurrency: args.concurrency,
    });
    await sleep(args.warmupS * 1000);
    const disruption = await disrupt({ setup, clients, userIds });
    await sleep(Math.max(0, args.afterS * 1000 - (performance.now() - disruption.endedAt)));
    await load.stop();
    const loadStoppedAt = performance.now();

    const finals = await finalSeqs(db, userIds);
    const deadline = performance.now() + args.convergeTimeoutMs;
    let converged = false;
    while (performance.now() < deadline) {
      if (clients.every((c) => c.live && c.maxId >= (finals.get(c.user.id) ?? 0))) {
        converged = true;
        break;
      }
      await sleep(100);
    }
    await sleep(1_000); // late duplicates would still be counted
    const reached = (seqs: Map<string, number>) =>
      clients.reduce((m, c) => Math.max(m, c.reachedAt(seqs.get(c.user.id) ?? 0)), Number.NEGATIVE_INFINITY);

    const audits = await audit(db, clients, finals);
    const models = await checkModels(setup, opened.byUser, args.sample);
    let logged = 0;
    for (const id of userIds) logged += (finals.get(id) ?? 0) - (initial.get(id) ?? 0);
    report({
      title:
        `${disruption.title}: 3 instances, ${args.users} users × ${args.devices} devices, ${args.rate} ops/s, ` +
        `${describe} (warmup ${args.warmupS} s, ${args.afterS} s after)`,
      audits,
      load: load.stats,
      loggedEvents: logged,
      timings: disruption.timings({ finalAt: reached(finals), loadStoppedAt, reached }),
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
