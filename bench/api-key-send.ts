// Single-user sends authenticated with an API key (POST /admin/notifications/send, `Authorization: Bearer hk_…`):
// the key lookup (one indexed PostgreSQL read), the per-key rate limit (one Redis INCR) and the send itself.
// One real server process (test cluster harness), 50 connections by default.
// Usage: npm run bench -- api-key-send [--duration 10] [--connections 50]
import os from 'node:os';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster } from '@herald/server/testkit';
import autocannon from 'autocannon';
import pg from 'pg';
import { numberArg, ONE_ADDRESS_LIMITS, signIn } from './_lib.js';

const duration = numberArg('duration', 10);
const connections = numberArg('connections', 50);

async function main() {
  const cluster = await startCluster({
    instances: 1,
    env: {
      ...ONE_ADDRESS_LIMITS,
      LOG_LEVEL: 'warn',
      AUTH_RATE_LIMIT_MAX: '1000000',
      // The benchmark measures the path, not the limit.
      API_KEY_RATE_LIMIT_MAX: '100000000',
    },
  });
  try {
    const base = cluster.url(0);
    const admin = await createVerifiedUserOn(cluster, 0);
    const target = await createVerifiedUserOn(cluster, 0);
    const client = new pg.Client({ connectionString: cluster.db.url });
    await client.connect();
    await client.query(`update "user" set role = 'admin' where id = $1`, [admin.id]);
    await client.end();
    const cookie = await signIn(base, admin.email, admin.password);
    const created = await fetch(`${base}/admin/api-keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie },
      body: JSON.stringify({ name: 'bench', scopes: ['notifications:send'] }),
    });
    if (created.status !== 201) throw new Error(`key creation failed: ${created.status}`);
    const { key } = (await created.json()) as { key: string };

    const body = JSON.stringify({
      target: { scope: 'user', identifier: target.id },
      notification: { type: 'announcement', title: 'Bench', content: 'Sent with an API key' },
    });
    const run = async (title: string, auth: Record<string, string>) => {
      const result = await autocannon({
        url: `${base}/admin/notifications/send`,
        method: 'POST',
        connections,
        duration,
        headers: { 'content-type': 'application/json', ...auth },
        body,
      });
      return {
        path: title,
        'req/s': Math.round(result.requests.average),
        'p50 ms': result.latency.p50,
        'p99 ms': result.latency.p99,
        'max ms': result.latency.max,
        non2xx: result.non2xx,
        errors: result.errors,
      };
    };
    const loadBefore = os.loadavg();
    const rows = [
      await run('POST /admin/notifications/send, API key, one user', { authorization: `Bearer ${key}` }),
      // The same path with the admin's session cookie: what the key lookup and its rate limit add.
      await run('same, admin session cookie (baseline)', { cookie, origin: CLUSTER_ORIGIN }),
    ];
    console.log(`\n${connections} connections, ${duration} s per row, one server process`);
    console.table(rows);
    const fmt = (l: number[]) => l.map((v) => v.toFixed(2)).join(' ');
    console.log(
      `os.loadavg() before: ${fmt(loadBefore)}  after: ${fmt(os.loadavg())}  (${os.cpus().length} cores)`,
    );
  } finally {
    await cluster.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
