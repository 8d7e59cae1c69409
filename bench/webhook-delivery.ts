// Webhook delivery from the durable queue to a local receiver (node:http in this process), through one real
// server process (test cluster harness). Two phases:
//  1. lag: single-user sends at a steady rate; lag = receive time − the event's timestamp (the notification's
//     createdAt) per event, p50/p99;
//  2. throughput: one broadcast to --users users; events/s from the send request to the last event received.
// Usage: npm run bench -- webhook-delivery [--users 5000] [--rate 20] [--seconds 10]
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster } from '@herald/server/testkit';
import pg from 'pg';
import { numberArg, ONE_ADDRESS_LIMITS, percentile, signIn } from './_lib.js';

const users = numberArg('users', 5000);
const rate = numberArg('rate', 20);
const seconds = numberArg('seconds', 10);

async function main() {
  const arrivals: Array<{ title: string; lagMs: number; at: number }> = [];
  let onArrival: (() => void) | undefined;
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const now = Date.now();
      const body = JSON.parse(Buffer.concat(chunks).toString()) as {
        timestamp: string;
        data: { title: string };
      };
      arrivals.push({ title: body.data.title, lagMs: now - Date.parse(body.timestamp), at: now });
      res.writeHead(204).end();
      onArrival?.();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  const until = (n: number) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (arrivals.length >= n) resolve();
      };
      onArrival = check;
      check();
    });

  const cluster = await startCluster({
    instances: 1,
    env: { ...ONE_ADDRESS_LIMITS, LOG_LEVEL: 'warn', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
  });
  try {
    const base = cluster.url(0);
    const admin = await createVerifiedUserOn(cluster, 0);
    const client = new pg.Client({ connectionString: cluster.db.url });
    await client.connect();
    await client.query(`update "user" set role = 'admin' where id = $1`, [admin.id]);
    // Unverified: no notification emails, so the SMTP capture does not compete with the measurement.
    await client.query(
      `insert into "user" (id, name, email, email_verified, created_at, updated_at)
       select 'wb-' || g, 'User ' || g, 'wb-' || g || '@example.test', false, now(), now()
       from generate_series(1, $1::int) g`,
      [users],
    );
    const cookie = await signIn(base, admin.email, admin.password);
    const headers = { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie };
    const hook = await fetch(`${base}/admin/webhooks`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ url: hookUrl, events: ['notification.created'] }),
    });
    if (hook.status !== 201) throw new Error(`webhook creation failed: ${hook.status} ${await hook.text()}`);
    const send = async (target: Record<string, unknown>, title: string) => {
      const res = await fetch(`${base}/admin/notifications/send`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ target, notification: { type: 'announcement', title, content: 'bench' } }),
      });
      if (res.status !== 200) throw new Error(`send failed: ${res.status} ${await res.text()}`);
      return (await res.json()) as { createdCount: number };
    };

    const loadBefore = os.loadavg();
    // Phase 1: steady single-user sends.
    const steady = rate * seconds;
    for (let i = 0; i < steady; i++) {
      const started = Date.now();
      await send({ scope: 'user', identifier: admin.id }, `steady ${i}`);
      const wait = 1000 / rate - (Date.now() - started);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    await until(steady);
    const lags = arrivals.map((a) => a.lagMs).sort((a, b) => a - b);

    // Phase 2: one broadcast to everyone.
    const t0 = Date.now();
    const { createdCount } = await send({ scope: 'all' }, 'broadcast');
    const requestMs = Date.now() - t0;
    await until(steady + createdCount);
    const burst = arrivals.slice(steady);
    const lastAt = Math.max(...burst.map((a) => a.at));
    const burstLags = burst.map((a) => a.lagMs).sort((a, b) => a - b);
    const loadAfter = os.loadavg();

    console.log('\none server process, default WEBHOOK_* settings, receiver answering 204 at once');
    console.table([
      {
        phase: `steady: ${rate} sends/s for ${seconds} s`,
        events: steady,
        'lag p50 ms': percentile(lags, 50),
        'lag p99 ms': percentile(lags, 99),
        'lag max ms': lags.at(-1),
      },
      {
        phase: `broadcast to ${createdCount} users (request ${requestMs} ms)`,
        events: burst.length,
        'events/s': Math.round(burst.length / ((lastAt - t0) / 1000)),
        'lag p50 ms': percentile(burstLags, 50),
        'lag p99 ms': percentile(burstLags, 99),
        'lag max ms': burstLags.at(-1),
      },
    ]);
    const fmt = (l: number[]) => l.map((v) => v.toFixed(2)).join(' ');
    console.log(
      `os.loadavg() before: ${fmt(loadBefore)}  after: ${fmt(loadAfter)}  (${os.cpus().length} cores)`,
    );
    await client.end();
  } finally {
    await cluster.close();
    receiver.closeAllConnections();
    receiver.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
