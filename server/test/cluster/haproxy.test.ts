// HAProxy (Debian's package) runs the committed deploy/haproxy.cfg in front of three Herald processes: sign-in
// through the balancer and a session that works whichever instance answers; SSE and WebSocket through it; then a
// rolling restart (each instance SIGTERMed in turn, drained through its 503 /health, started again) under
// notification traffic: the SSE client, resuming with Last-Event-ID through the balancer, ends with every
// notification exactly once, and chat clients reconnect and deliver.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';
import { freePort, trackChild } from '../helpers/redis-server.js';
import { openStream, type SseClient, type SseEvent } from '../helpers/sse-client.js';
import { type ChatClient, openChat } from '../helpers/ws-client.js';

const HAPROXY = '/usr/sbin/haproxy';
const CONFIG = fileURLToPath(new URL('../../../deploy/haproxy.cfg', import.meta.url));
const ADMIN_EMAIL = `lb-admin-${randomUUID().slice(0, 8)}@example.test`;
const available = existsSync(HAPROXY);
if (!available) {
  console.warn(
    `haproxy.test.ts skipped: ${HAPROXY} is missing (apt-get install -y haproxy; .ci/run installs it)`,
  );
}

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!available)('HAProxy in front of three instances', () => {
  let cluster: TestCluster;
  let haproxy: ChildProcess;
  let lb: string;
  const haproxyLog: string[] = [];
  const chats: ChatClient[] = [];
  const streams: SseClient[] = [];

  const instanceBehindLb = async () => {
    const res = await fetch(`${lb}/health`);
    return ((await res.json()) as { instanceId?: string }).instanceId;
  };
  /** Until three consecutive round-robin answers name three different instances: all three are in rotation. */
  const allInRotation = async (timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const ids = new Set<string | undefined>();
      for (let i = 0; i < 3; i++) ids.add(await instanceBehindLb().catch(() => undefined));
      if (ids.size === 3 && !ids.has(undefined)) return;
      await delay(200);
    }
    throw new Error(`not all instances in rotation:\n${haproxyLog.slice(-20).join('\n')}`);
  };

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 3,
      env: {
        ADMIN_EMAILS: ADMIN_EMAIL,
        TRUST_PROXY: 'true',
        // A little above the balancer's inter × fall (1 s × 2): the instance is out of rotation before it closes.
        SHUTDOWN_DRAIN_MS: '2500',
        SHUTDOWN_TIMEOUT_MS: '10000',
        CHAT_THROTTLE_LIMIT: '100000',
        LOG_LEVEL: 'info',
      },
    });
    const port = await freePort();
    lb = `http://127.0.0.1:${port}`;
    haproxy = spawn(HAPROXY, ['-db', '-f', CONFIG], {
      env: {
        ...process.env,
        HERALD_BIND: `127.0.0.1:${port}`,
        HERALD_1: `127.0.0.1:${cluster.port(0)}`,
        HERALD_2: `127.0.0.1:${cluster.port(1)}`,
        HERALD_3: `127.0.0.1:${cluster.port(2)}`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    trackChild(haproxy);
    for (const stream of [haproxy.stdout, haproxy.stderr]) {
      stream?.on('data', (chunk: Buffer) => haproxyLog.push(...chunk.toString().split('\n').filter(Boolean)));
    }
    await allInRotation();
  }, 180_000);
  afterAll(async () => {
    for (const s of streams) s.close();
    await Promise.allSettled(chats.map((c) => c.close()));
    haproxy?.kill('SIGKILL');
    await cluster?.close();
  });

  it('signs in through the balancer; the session works on every instance', async () => {
    const user = await createVerifiedUserOn(cluster, 0, { baseUrl: lb });
    const answeredBy = new Set<string | undefined>();
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${lb}/notification/unread-count`, { headers: { cookie: user.cookie } });
      expect(res.status).toBe(200);
      answeredBy.add(await instanceBehindLb());
    }
    expect(answeredBy.size).toBe(3);
  });

  it('carries SSE and WebSocket; a rolling restart loses no notification and chat reconnects', async () => {
    const admin = await createVerifiedUserOn(cluster, 0, { email: ADMIN_EMAIL, baseUrl: lb });
    const user = await createVerifiedUserOn(cluster, 0, { baseUrl: lb });
    const wsUrl = `${lb.replace('http', 'ws')}/chat`;

    // SSE through the balancer, resuming with Last-Event-ID whenever the stream ends (its instance stopped).
    const events: SseEvent[] = [];
    let stream: SseClient | undefined;
    let lastId: string | undefined;
    let following = true;
    const follow = (async () => {
      while (following) {
        try {
          const s = await openStream(lb, user.cookie, { lastEventId: lastId });
          stream = s;
          streams.push(s);
          if (s.status !== 200) {
            s.close();
            await delay(200);
            continue;
          }
          let seen = 0;
          const pump = setInterval(() => {
            for (; seen < s.events.length; seen++) {
              const e = s.events[seen];
              if (!e) continue;
              events.push(e);
              if (e.id !== undefined) lastId = e.id;
            }
          }, 20);
          await s.ended;
          clearInterval(pump);
          for (; seen < s.events.length; seen++) {
            const e = s.events[seen];
            if (!e) continue;
            events.push(e);
            if (e.id !== undefined) lastId = e.id;
          }
        } catch {
          await delay(200);
        }
      }
    })();

    // Chat through the balancer; a client whose socket closes reconnects through it.
    const chatters: Array<{ client: ChatClient | undefined }> = [
      { client: undefined },
      { client: undefined },
    ];
    let chatting = true;
    const keepChat = chatters.map(async (slot) => {
      while (chatting) {
        try {
          const c = await openChat(wsUrl, { cookie: user.cookie, origin: CLUSTER_ORIGIN });
          chats.push(c);
          slot.client = c;
          await c.closed;
        } catch {
          await delay(200);
        }
        slot.client = undefined;
      }
    });

    // The stream must be connected before the first send: a first connect (no Last-Event-ID) starts at the
    // user's current cursor, so a notification created just before it is not on the stream, by design.
    for (const deadline = Date.now() + 20_000; !events.some((e) => e.event === 'connected'); ) {
      if (Date.now() > deadline) throw new Error('the stream never connected through the balancer');
      await delay(50);
    }

    const sent: string[] = [];
    const refused: number[] = [];
    let sending = true;
    const sender = (async () => {
      for (let n = 0; sending; n++) {
        const title = `rolling-${n}`;
        const res = await fetch(`${lb}/admin/notifications/send`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie: admin.cookie },
          body: JSON.stringify({
            target: { scope: 'user', identifier: user.email },
            notification: { type: 'info', title, content: 'rolling restart' },
          }),
        }).catch(() => undefined);
        if (res?.status === 200) sent.push(title);
        else refused.push(res?.status ?? 0);
        await delay(150);
      }
    })();

    await delay(1_000);
    expect(stream?.status).toBe(200);
    const t0 = Date.now();
    for (let i = 0; i < 3; i++) {
      const exit = await cluster.kill(i, 'SIGTERM');
      expect(exit.code).toBe(0);
      const from = cluster.logs(i).length;
      await cluster.start(i).catch((err: unknown) => {
        throw new Error(
          `restart of instance ${i} failed: ${String(err)}\n${cluster.logs(i).slice(from).join('\n')}`,
        );
      });
      await allInRotation();
      console.log(`rolling restart: instance ${i} back in rotation after ${Date.now() - t0} ms`);
    }
    await delay(1_000);
    sending = false;
    await sender;

    // Every notification the balancer accepted arrives exactly once on the resuming stream.
    const titles = () =>
      events
        .filter((e) => e.event === 'new_notification')
        .map((e) => (e.data.notification as { title: string }).title);
    const last = sent[sent.length - 1];
    for (const deadline = Date.now() + 20_000; last && !titles().includes(last) && Date.now() < deadline; ) {
      await delay(100);
    }
    following = false;
    stream?.close();
    await follow;
    const got = titles();
    console.log(
      `rolling restart: ${sent.length} notifications accepted, ${got.length} received, ${refused.length} refused`,
    );
    expect(refused).toEqual([]);
    if (got.length !== sent.length) {
      // What a failure needs to be understood: which titles, and the stream's connects and ids around them.
      const missing = sent.filter((t) => !got.includes(t));
      const trail = events
        .filter((e) => e.event !== 'keep_alive')
        .map((e) =>
          e.event === 'new_notification'
            ? `${e.id}:${(e.data.notification as { title: string }).title}`
            : `${e.id}:${e.event}${e.event === 'connected' ? JSON.stringify(e.data) : ''}`,
        );
      console.log(`missing: ${JSON.stringify(missing)}\ntrail: ${trail.join(' ')}`);
    }
    expect(got.length).toBe(sent.length);
    expect([...got].sort()).toEqual([...sent].sort());

    // Both chat clients reconnected through the balancer and deliver to each other.
    for (const deadline = Date.now() + 20_000; chatters.some((c) => !c.client) && Date.now() < deadline; ) {
      await delay(100);
    }
    const [one, two] = chatters.map((c) => c.client);
    if (!one || !two) throw new Error('chat clients did not reconnect');
    const clientMessageId = randomUUID();
    one.send({ type: 'send_message', message: 'after the rolling restart', clientMessageId });
    const got2 = await two.next('new_message', (e) => e.message?.clientMessageId === clientMessageId);
    expect(got2.message.message).toBe('after the rolling restart');
    chatting = false;
    await Promise.allSettled(chatters.map((c) => c.client?.close()));
    await Promise.allSettled(keepChat);
  }, 300_000);
});
