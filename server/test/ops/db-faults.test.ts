// Killing real instances' database connections during ordinary traffic (CONTRACT §8 "Survives its
// dependencies", issue 22 (1): the reported crash was on the second of two instances sharing PostgreSQL and
// Redis). Two child processes (cluster helpers) under list/counts/unread reads, admin sends, mark-all-read
// transactions and chat sends spread over both, with an SSE stream and a chat socket open on each, have ONLY
// their own backends (application_name herald:<instanceId>) terminated again and again. Both processes must stay
// alive, the streams and sockets open, every request answered 2xx or 503 UNAVAILABLE (never 500, never a reset),
// and everything must work again afterwards without a restart, across the instances too.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';
import { openStream, type SseClient } from '../helpers/sse-client.js';
import { type ChatClient, openChat } from '../helpers/ws-client.js';

const ADMIN_EMAIL = `dbf-admin-${randomUUID().slice(0, 8)}@example.test`;
const KILLS = 25;
const KILL_EVERY_MS = 150;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const INSTANCES = [0, 1] as const;

describe('database connections killed under traffic (two real processes)', () => {
  let cluster: TestCluster;
  let db: pg.Client;
  let admin: { id: string; cookie: string };
  let user: { id: string; cookie: string };

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      env: { ADMIN_EMAILS: ADMIN_EMAIL, LOG_LEVEL: 'warn', CHAT_THROTTLE_LIMIT: '100000' },
    });
    admin = await createVerifiedUserOn(cluster, 0, { email: ADMIN_EMAIL, name: 'Admin' });
    user = await createVerifiedUserOn(cluster, 0, { name: 'Target' });
    db = new pg.Client({ connectionString: cluster.db.url });
    await db.connect();
  }, 90_000);
  afterAll(async () => {
    await db?.end();
    await cluster?.close();
  });

  const call = async (method: string, path: string, cookie: string, body?: unknown, instance = 0) => {
    const headers: Record<string, string> = { origin: CLUSTER_ORIGIN, cookie };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${cluster.url(instance)}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(20_000),
    });
    const text = await res.text();
    return { status: res.status, text };
  };
  const send = (title: string, instance: number) =>
    call(
      'POST',
      '/admin/notifications/send',
      admin.cookie,
      {
        target: { scope: 'user', identifier: user.id },
        notification: { type: 'info', title, content: 'during the database fault run' },
      },
      instance,
    );

  it('both stay up, answer only 2xx/503 while their backends are killed, and recover by themselves', async () => {
    const streams: SseClient[] = [];
    const chats: ChatClient[] = [];
    for (const i of INSTANCES) {
      const stream = await openStream(cluster.url(i), user.cookie);
      expect(stream.status).toBe(200);
      await stream.waitFor((e) => e.event === 'connected');
      streams.push(stream);
      chats.push(
        await openChat(`ws://127.0.0.1:${cluster.port(i)}/chat`, {
          cookie: user.cookie,
          origin: CLUSTER_ORIGIN,
        }),
      );
    }
    const appNames = INSTANCES.map((i) => `herald:${cluster.instanceId(i)}`);

    const outcomes = new Map<string, number>();
    const bad: string[] = [];
    const record = (what: string, outcome: string, text = '') => {
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      const ok = /^2\d\d$/.test(outcome) || (outcome === '503' && /"code":"UNAVAILABLE"/.test(text));
      if (!ok && bad.length < 10) bad.push(`${what} → ${outcome} ${text.slice(0, 160)}`);
    };
    let running = true;
    let n = 0;
    const worker = async (w: number) => {
      while (running) {
        const i = n++;
        const kind = (i + w) % 7;
        const [method, path, cookie, body] =
          kind === 0
            ? // Page 2 is never cached: it goes through the shared list statements (page-batch.ts).
              (['GET', `/notification/list?limit=5${i % 2 ? '&page=2' : ''}`, user.cookie] as const)
            : kind === 1
              ? (['GET', '/notification/counts', user.cookie] as const)
              : kind === 2
                ? (['GET', '/notification/unread-count', user.cookie] as const)
                : kind === 3
                  ? (['PATCH', '/notification/mark-all-read', user.cookie] as const)
                  : kind === 4
                    ? (['GET', '/chat/history?limit=5', user.cookie] as const)
                    : kind === 5
                      ? (['GET', '/auth/get-session', user.cookie] as const)
                      : ([
                          'POST',
                          '/admin/notifications/send',
                          admin.cookie,
                          {
                            target: { scope: 'user', identifier: user.id },
                            notification: { type: 'info', title: `fault ${i}`, content: 'x' },
                          },
                        ] as const);
        // Half the workers on each instance.
        const instance = w % 2;
        try {
          const res = await call(method, path, cookie, body, instance);
          record(`${method} ${path} @${instance}`, String(res.status), res.text);
        } catch (err) {
          record(
            `${method} ${path} @${instance}`,
            `reset: ${err instanceof Error ? err.message : String(err)}`,
          );
        }
        if (kind === 3) {
          chats[instance]?.send({ type: 'send_message', message: `m ${i}`, clientMessageId: `c-${i}` });
        }
      }
    };
    const workers = Array.from({ length: 6 }, (_, w) => worker(w));

    const terminated = [0, 0];
    for (let k = 0; k < KILLS; k++) {
      await delay(KILL_EVERY_MS);
      // Only the two instances' backends (their application_name), in this test's database.
      const res = await db.query<{ name: string }>(
        `select application_name as name, pg_terminate_backend(pid) from pg_stat_activity
         where application_name = any($1) and datname = current_database()`,
        [appNames],
      );
      for (const row of res.rows) {
        const i = appNames.indexOf(row.name);
        terminated[i] = (terminated[i] ?? 0) + 1;
      }
    }
    running = false;
    await Promise.all(workers);

    // Alive first (a crash also leaves no backends to kill), then: the kills did hit each one's connections.
    for (const i of INSTANCES) {
      expect(cluster.isRunning(i), `instance ${i}`).toBe(true);
      expect(terminated[i], `backends of instance ${i} terminated`).toBeGreaterThan(KILLS / 2);
    }
    expect(bad).toEqual([]);
    expect(outcomes.get('200') ?? 0).toBeGreaterThan(0);
    for (const i of INSTANCES) {
      expect(streams[i]?.isEnded(), `stream on instance ${i}`).toBe(false);
      expect(chats[i]?.ws.readyState, `chat socket on instance ${i}`).toBe(WebSocket.OPEN);
    }

    // Recovered without a restart: every kind of request succeeds on both, a send on one instance reaches the
    // stream open on each, and a chat message from a socket on one reaches the socket on the other.
    for (const from of INSTANCES) {
      const title = `after the faults via ${from} ${randomUUID()}`;
      const seen = streams.map((s) => s.events.length);
      const sent = await send(title, from);
      expect(sent.status, sent.text).toBe(200);
      for (const i of INSTANCES) {
        await streams[i]?.waitFor(
          (e) => e.event === 'new_notification' && (e.data.notification as { title: string }).title === title,
          15_000,
          seen[i],
        );
      }
      for (const path of ['/notification/list', '/notification/counts', '/notification/unread-count']) {
        expect((await call('GET', path, user.cookie, undefined, from)).status).toBe(200);
      }
      const clientMessageId = `after-${from}-${randomUUID()}`;
      chats[from]?.send({ type: 'send_message', message: `still here ${from}`, clientMessageId });
      for (const chat of chats) {
        const echoed = await chat.next(
          'new_message',
          (e) => e.message?.clientMessageId === clientMessageId,
          15_000,
        );
        expect(echoed.message.message).toBe(`still here ${from}`);
      }
    }
    for (const i of INSTANCES) {
      expect(streams[i]?.isEnded()).toBe(false);
      expect(cluster.isRunning(i)).toBe(true);
      // No error-level line for a database fault: they are expected and logged as warnings.
      const errors = cluster.jsonLogs(i).filter((l) => Number(l.level) >= 50);
      expect(
        errors.map((l) => l.msg),
        `instance ${i}`,
      ).toEqual([]);
    }

    for (const stream of streams) stream.close();
    for (const chat of chats) await chat.close();
  }, 180_000);
});
