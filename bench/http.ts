// HTTP hot paths under load (autocannon): the paths DESIGN.md §7 measured on the reference implementation.
// One real server process (test cluster harness: PostgreSQL, private Redis, in-process SMTP), a user signed up
// through the real endpoints, 1,000 notifications seeded for them, then each path loaded in turn.
// Usage: npm run bench -- http [--duration 10] [--connections 100]

import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster } from '@herald/server/testkit';
import autocannon from 'autocannon';
import pg from 'pg';
import { numberArg, ONE_ADDRESS_LIMITS, printTable } from './_lib.js';

const duration = numberArg('duration', 10);
const connections = numberArg('connections', 100);

async function load(
  title: string,
  opts: { url: string; method?: 'GET' | 'POST'; headers?: Record<string, string>; body?: string },
) {
  const result = await autocannon({ ...opts, connections, duration });
  return {
    path: title,
    'req/s': Math.round(result.requests.average),
    'p50 ms': result.latency.p50,
    'p99 ms': result.latency.p99,
    'max ms': result.latency.max,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

async function main() {
  // Production logging levels: request logs would otherwise dominate the measurement.
  const cluster = await startCluster({
    instances: 1,
    env: { ...ONE_ADDRESS_LIMITS, LOG_LEVEL: 'warn', AUTH_RATE_LIMIT_MAX: '1000000' },
  });
  try {
    const base = cluster.url(0);
    const user = await createVerifiedUserOn(cluster, 0);
    const client = new pg.Client({ connectionString: cluster.db.url });
    await client.connect();
    await client.query(
      `insert into notification (user_id, type, title, content, read, created_at)
       select $1, (array['system','message','mention','info'])[1 + g % 4], 'Title ' || g, 'Content number ' || g,
              g % 3 = 0, now() - (g || ' seconds')::interval
       from generate_series(1, 1000) g`,
      [user.id],
    );
    await client.end();

    const cookie = { cookie: user.cookie };
    const rows = [
      await load('GET /health', { url: `${base}/health` }),
      await load('GET /auth/get-session', { url: `${base}/auth/get-session`, headers: cookie }),
      await load('GET /notification/unread-count', {
        url: `${base}/notification/unread-count`,
        headers: cookie,
      }),
      await load('GET /notification/list (1,000 rows)', {
        url: `${base}/notification/list?page=3&limit=20`,
        headers: cookie,
      }),
      await load('POST /auth/sign-in/email', {
        url: `${base}/auth/sign-in/email`,
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN },
        body: JSON.stringify({ email: user.email, password: user.password }),
      }),
    ];
    console.log(`\n${connections} connections, ${duration} s per path, one server process (2-core machine)`);
    printTable(rows);
  } finally {
    await cluster.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
