// What a list page costs in statements (issue 27 target 2; docs/performance.md "List pages read together"): the
// repository's own list (notifications/list-pages.ts) over a node-postgres pool of 10, 100 readers each asking for
// page 2 again and again, on 500,000 rows / 5,000 users with the measured users holding 1,000 rows each. Two
// settings of the same code, alternating: every page in a statement of its own (`listBatchMax: 0`, as before
// page-batch.ts) and pages that wait together sharing one (the defaults). No HTTP, no session: the statement's cost
// alone, in Node and PostgreSQL CPU per page.
//
// Usage: npm run bench -- list-statements [--readers 100] [--users 100] [--seconds 6] [--rounds 2] [--rows 500000]
//        --users 1: every reader asks for the same user's page (equal pages queued together are read once)
import pg from 'pg';
import { createDatabase } from '../server/src/infra/db.js';
import { createNotificationRepository } from '../server/src/notifications/repository.js';
import { cpuSecondsOfProcesses, machineLoad, numberArg, percentile, printTable } from './_lib.js';
import { seedAtScale } from './_seed.js';
import { startStack } from './_server.js';

const readers = numberArg('readers', 100);
const measuredUsers = numberArg('users', 100);
const seconds = numberArg('seconds', 6);
const rounds = numberArg('rounds', 2);
const rows = numberArg('rows', 500_000);

const SETTINGS = [
  { name: 'a statement per page', options: { listBatchMax: 0 } },
  { name: 'pages waiting together share one', options: {} },
] as const;

async function main() {
  const stack = await startStack();
  const database = await createDatabase({ databaseUrl: stack.db.url, dataDir: '' });
  try {
    await database.migrate();
    const ids = Array.from({ length: measuredUsers }, (_, i) => `m${i + 1}`);
    const setup = new pg.Client({ connectionString: stack.db.url });
    await setup.connect();
    await setup.query(
      `insert into "user" (id, name, email, email_verified)
       select u, u, u || '@example.test', true from unnest($1::text[]) u`,
      [ids],
    );
    await setup.end();
    await seedAtScale(stack.db.url, ids, { rows, users: 5_000 });
    console.log(`seeded ${rows.toLocaleString('en')} rows; ${readers} readers over ${measuredUsers} user(s)`);

    for (let round = 1; round <= rounds; round++) {
      const before = machineLoad();
      const table = [];
      for (const setting of SETTINGS) {
        const repo = createNotificationRepository(database.db, undefined, setting.options);
        const query = { page: 2, limit: 20, filter: 'all' } as const;
        // Warm the named statements on every pool connection.
        await Promise.all(ids.slice(0, 20).map((id) => repo.list(id, query)));
        const latencies: number[] = [];
        const cpu0 = process.cpuUsage();
        const pg0 = cpuSecondsOfProcesses('postgres');
        const t0 = performance.now();
        const end = t0 + seconds * 1000;
        let pages = 0;
        await Promise.all(
          Array.from({ length: readers }, async (_, i) => {
            const id = ids[i % ids.length] as string;
            while (performance.now() < end) {
              const start = performance.now();
              const page = await repo.list(id, query);
              if (page.rows.length !== 20) throw new Error(`expected 20 rows, got ${page.rows.length}`);
              latencies.push(performance.now() - start);
              pages++;
            }
          }),
        );
        const elapsed = (performance.now() - t0) / 1000;
        const cpu = process.cpuUsage(cpu0);
        const pgSeconds = cpuSecondsOfProcesses('postgres') - pg0;
        latencies.sort((a, b) => a - b);
        table.push({
          setting: setting.name,
          'pages/s': Math.round(pages / elapsed),
          'p50 ms': Number(percentile(latencies, 50).toFixed(1)),
          'p99 ms': Number(percentile(latencies, 99).toFixed(1)),
          'Node CPU µs/page': Math.round((cpu.user + cpu.system) / pages),
          'PostgreSQL CPU µs/page': Math.round((pgSeconds * 1e6) / pages),
        });
      }
      console.log(
        `\nround ${round}/${rounds}: ${readers} readers over ${measuredUsers} user(s), ${seconds} s each`,
      );
      console.log(`before: ${before}`);
      printTable(table, 'after:');
    }
  } finally {
    await database.close();
    await stack.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
