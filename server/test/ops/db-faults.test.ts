// Killing a real instance's database connections during ordinary traffic (CONTRACT §8 "Survives its
// dependencies"): a child process (cluster helpers) under list/counts/unread reads, admin sends, mark-all-read
// transactions and chat sends, with an SSE stream and a chat socket open, has ONLY its own backends
// (application_name herald:<instanceId>) terminated again and again. The process must stay alive, the stream
// and the socket open, every request answered 2xx or 503 UNAVAILABLE (never 500, never a reset), and
// everything must work again afterwards without a restart.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';
import { openStream, type SseClient } from '../helpers/sse-client.js';
import { type ChatClient, openChat } from '../helpers/ws-client.js';

const ADMIN_EMAIL = `dbf-admin-${randomUUID().slice(0, 8)}@example.test`;
const KILLS = 25;
const KILL_EVERY_MS = 150;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('database connections killed under traffic (real process)', () => {
  let cluster: TestCluster;
  let db: pg.Client;
  let admin: { id: string; cookie: string };
  let user: { id: string; cookie: string };

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 1,
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

  const call = async (method: string, path: string, cookie: string, body?: unknown) => {
    const headers: Record<string, string> = { origin: CLUSTER_ORIGIN, cookie };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${cluster.url(0)}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(20_000),
    });
    const text = await res.text();
    return { status: res.status, text };
  };
  const send = (title: string) =>
    call('POST', '/admin/notifications/send', admin.cookie, {
      target: { scope: 'user', identifier: user.id },
      notification: { type: 'info', title, content: 'during the database fault run' },
    });

  it('stays up, answers only 2xx/503 while its backends are killed, and recovers by itself', async () => {
    const stream: SseClient = await openStream(cluster.url(0), user.cookie);
    expect(stream.status).toBe(200);
    await stream.waitFor((e) => e.event === 'connected');
    const chat: ChatClient = await openChat(`ws://127.0.0.1:${cluster.port(0)}/chat`, {
      cookie: user.cookie,
      origin: CLUSTER_ORIGIN,
    });
    const appName = `herald:${cluster.instanceId(0)}`;

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
            ? (['GET', '/notification/list?limit=5', user.cookie] as const)
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
        try {
          const res = await call(method, path, cookie, body);
          record(`${method} ${path}`, String(res.status), res.text);
        } catch (err) {
          record(`${method} ${path}`, `reset: ${err instanceof Error ? err.message : String(err)}`);
        }
        if (kind === 3) chat.send({ type: 'send_message', message: `m ${i}`, clientMessageId: `c-${i}` });
      }
    };
    const workers = Array.from({ length: 6 }, (_, w) => worker(w));

    let terminated = 0;
    for (let k = 0; k < KILLS; k++) {
      await delay(KILL_EVERY_MS);
      // Only this instance's backends (its application_name), in this test's database.
      const res = await db.query(
        `select pg_terminate_backend(pid) from pg_stat_activity
         where application_name = $1 and datname = current_database()`,
        [appName],
      );
      terminated += res.rowCount ?? 0;
    }
    running = false;
    await Promise.all(workers);

    // Alive first (a crash also leaves no backends to kill), then: the kills did hit its connections.
    expect(cluster.isRunning(0)).toBe(true);
    expect(terminated).toBeGreaterThan(KILLS / 2);
    expect(bad).toEqual([]);
    expect(outcomes.get('200') ?? 0).toBeGreaterThan(0);
    expect(stream.isEnded()).toBe(false);
    expect(chat.ws.readyState).toBe(chat.ws.OPEN);

    // Recovered without a restart: every kind of request succeeds, and the open stream and socket still carry
    // live traffic.
    const title = `after the faults ${randomUUID()}`;
    const from = stream.events.length;
    const sent = await send(title);
    expect(sent.status).toBe(200);
    await stream.waitFor(
      (e) => e.event === 'new_notification' && (e.data.notification as { title: string }).title === title,
      15_000,
      from,
    );
    for (const path of ['/notification/list', '/notification/counts', '/notification/unread-count']) {
      expect((await call('GET', path, user.cookie)).status).toBe(200);
    }
    const clientMessageId = `after-${randomUUID()}`;
    chat.send({ type: 'send_message', message: 'still here', clientMessageId });
    const echoed = await chat.next(
      'new_message',
      (e) => e.message?.clientMessageId === clientMessageId,
      15_000,
    );
    expect(echoed.message.message).toBe('still here');
    expect(stream.isEnded()).toBe(false);
    expect(cluster.isRunning(0)).toBe(true);
    // No error-level line for a database fault: they are expected and logged as warnings.
    const errors = cluster.jsonLogs(0).filter((l) => Number(l.level) >= 50);
    expect(errors.map((l) => l.msg)).toEqual([]);

    stream.close();
    await chat.close();
  }, 120_000);
});
