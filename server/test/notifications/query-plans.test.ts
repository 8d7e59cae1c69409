// The list, count and resume queries must use the indexes made for them on a production-sized table (issue 27:
// an index declared DESC NULLS LAST cannot serve `order by created_at desc, id desc`, so every uncached page
// scanned the global created_at index and sorted). The table is loaded with one INSERT … SELECT generate_series
// (300,000 notifications over 3,000 users, plus their event log, and one heavy user with 5,000 notifications and
// 2,000 events), analysed, and the repository's own statements (captured through Drizzle's logger) are run under
// EXPLAIN (FORMAT JSON). For a user with a hundred rows the planner may fetch them through the index and sort
// those few (cheaper than walking the index in order); for the heavy user the order must come from the index.
// The list and counts run as named prepared statements (infra/prepared-statements.ts), whose plan PostgreSQL may make
// generic (one plan for every user) after five executions: those are checked under that generic plan too.
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, type Db } from '../../src/infra/db.js';
import * as schema from '../../src/infra/schema/index.js';
import { createNotificationRepository } from '../../src/notifications/repository.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

const USERS = 3_000;
const ROWS = 300_000;
const EVENTS = 150_000;
const HEAVY = 'heavy';
const HEAVY_ROWS = 5_000;
const HEAVY_EVENTS = 2_000;
const ALLOWED_INDEX =
  /^(notification_user_|notification_event_user_id_seq_pk$|notification_pkey$|notification_cursor_pkey$)/;

interface QueryConfigLike {
  text: string;
  name?: string;
  values?: unknown[];
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

let testDb: TestDatabase;
let pool: pg.Pool;
let repoPool: pg.Pool;
let captured: Array<{ query: string; params: unknown[]; named: boolean }> = [];
let repo: ReturnType<typeof createNotificationRepository>;

/** Runs `work` against the repository and returns the plan of each statement it sent. */
async function plansOf(work: () => Promise<unknown>): Promise<PlanNode[]> {
  captured = [];
  await work();
  const plans: PlanNode[] = [];
  for (const { query, params, named } of captured) {
    const { rows } = await pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `explain (format json) ${query}`,
      params,
    );
    const plan = rows[0]?.['QUERY PLAN'][0]?.Plan;
    if (plan) plans.push(plan);
    if (named) plans.push(await genericPlanOf(query, params));
  }
  return plans;
}

/** The plans of one named statement: as planned for these parameters, and PostgreSQL's generic plan. */
async function namedPlansOf(work: () => Promise<unknown>): Promise<PlanNode[]> {
  const plans = await plansOf(work);
  expect(captured.map((c) => c.named)).toEqual([true]);
  expect(plans).toHaveLength(2);
  return plans;
}

/** The plan PostgreSQL uses for a prepared statement once it settles on one plan for all parameter values. */
async function genericPlanOf(query: string, params: unknown[]): Promise<PlanNode> {
  const client = await pool.connect();
  try {
    await client.query(`prepare generic_probe as ${query}`);
    await client.query('set plan_cache_mode = force_generic_plan');
    // EXECUTE takes no bind parameters: the values go in as quoted literals (the plan does not depend on them).
    const args = params.map((p) => `'${String(p).replaceAll("'", "''")}'`).join(', ');
    const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `explain (format json) execute generic_probe(${args})`,
    );
    const plan = rows[0]?.['QUERY PLAN'][0]?.Plan;
    if (!plan) throw new Error('no generic plan');
    return plan;
  } finally {
    await client.query('deallocate all; reset plan_cache_mode').catch(() => undefined);
    client.release();
  }
}

function indexesUsed(plan: PlanNode): string[] {
  return nodes(plan)
    .map((n) => n['Index Name'])
    .filter((n): n is string => n !== undefined);
}

/** Indexes that feed a Limit: where the page's rows come from. */
function pageIndexes(plan: PlanNode): string[] {
  return [
    ...new Set(
      nodes(plan)
        .filter((n) => n['Node Type'] === 'Limit')
        .flatMap((n) => indexesUsed(n)),
    ),
  ];
}

function expectNoScanOfWholeTable(plan: PlanNode) {
  for (const name of indexesUsed(plan)) expect(name).toMatch(ALLOWED_INDEX);
  for (const n of nodes(plan)) {
    if (n['Relation Name'] === 'notification' || n['Relation Name'] === 'notification_event') {
      expect(n['Node Type'], JSON.stringify(plan)).not.toBe('Seq Scan');
    }
    // The global created_at index (retention's) would mean a walk over every user's rows.
    expect(n['Index Name']).not.toBe('notification_created_idx');
  }
}

/** No Sort below a Limit: the rows come out of the index already in the page's order. */
function expectOrderFromIndex(plan: PlanNode) {
  for (const limit of nodes(plan).filter((n) => n['Node Type'] === 'Limit')) {
    const sorts = nodes(limit).filter(
      (n) => n['Node Type'] === 'Sort' || n['Node Type'] === 'Incremental Sort',
    );
    expect(sorts, JSON.stringify(plan)).toHaveLength(0);
  }
}

beforeAll(async () => {
  testDb = await createTestDatabase();
  const database = await createDatabase({ databaseUrl: testDb.url, dataDir: '' });
  await database.migrate();
  await database.close();
  pool = new pg.Pool({ connectionString: testDb.url, max: 2 });
  // The database is dropped with force at the end; a client still ending then gets "terminating connection", which
  // without a listener is an uncaught exception in the test process (it failed a green CI run).
  pool.on('error', () => {});
  await pool.query(
    `insert into "user" (id, name, email, email_verified)
       select 'u' || g, 'user ' || g, 'u' || g || '@example.test', true from generate_series(1, ${USERS}) g`,
  );
  // Spread over every user, timestamps interleaved across users (as real traffic is), a third read, five types.
  await pool.query(
    `insert into notification (user_id, type, title, content, read, created_at, updated_at)
       select 'u' || (1 + g % ${USERS}),
              (array['info','success','warning','error','system'])[1 + (g / ${USERS}) % 5],
              'title ' || g, 'content ' || g, g % 3 = 0,
              now() - g * interval '1 second', now() - g * interval '1 second'
       from generate_series(1, ${ROWS}) g`,
  );
  await pool.query(
    `insert into notification_cursor (user_id, last_seq, unread)
       select id, ${Math.ceil(EVENTS / USERS)}, 0 from "user"`,
  );
  await pool.query(
    `insert into notification_event (user_id, seq, kind, data)
       select 'u' || (1 + g % ${USERS}), 1 + g / ${USERS}, 'unread_count_changed', '{"unreadCount":0}'::jsonb
       from generate_series(0, ${EVENTS - 1}) g`,
  );
  await pool.query(
    `insert into "user" (id, name, email, email_verified) values ('${HEAVY}', 'heavy', 'heavy@example.test', true)`,
  );
  await pool.query(
    `insert into notification (user_id, type, title, content, read, created_at, updated_at)
       select '${HEAVY}', (array['info','success','warning','error','system'])[1 + g % 5], 'title ' || g,
              'content ' || g, g % 3 = 0, now() - g * interval '1 second', now() - g * interval '1 second'
       from generate_series(1, ${HEAVY_ROWS}) g`,
  );
  await pool.query(
    `insert into notification_cursor (user_id, last_seq, unread) values ('${HEAVY}', ${HEAVY_EVENTS}, 0)`,
  );
  await pool.query(
    `insert into notification_event (user_id, seq, kind, data)
       select '${HEAVY}', g, 'unread_count_changed', '{"unreadCount":0}'::jsonb from generate_series(1, ${HEAVY_EVENTS}) g`,
  );
  await pool.query('vacuum analyze notification');
  await pool.query('vacuum analyze notification_event');
  await pool.query('analyze notification_cursor');
  // The repository's own pool, every statement it sends recorded (Drizzle's and the named ones alike).
  repoPool = new pg.Pool({ connectionString: testDb.url, max: 2 });
  repoPool.on('error', () => {});
  const send = repoPool.query.bind(repoPool) as (config: unknown, values?: unknown) => Promise<unknown>;
  const record = (config: unknown, values?: unknown) => {
    const c = typeof config === 'string' ? { text: config } : (config as QueryConfigLike);
    const params = (Array.isArray(values) ? values : c.values) ?? [];
    captured.push({ query: c.text, params, named: c.name !== undefined });
    return send(config, values);
  };
  repoPool.query = record as unknown as typeof repoPool.query;
  const db = drizzle(repoPool, { schema, casing: 'snake_case' }) as unknown as Db;
  repo = createNotificationRepository(db);
}, 180_000);

afterAll(async () => {
  await repoPool?.end();
  await pool?.end();
  await testDb?.drop();
});

/**
 * The page's rows come from one of the user's indexes; for the heavy user from the intended one, in its order. (For
 * a user with a hundred rows the planner may take any user index and sort the few rows: cheaper, and just as fine.)
 */
function expectPage(plan: PlanNode, user: string, intended: string) {
  const used = pageIndexes(plan);
  expect(used).toHaveLength(1);
  if (user !== HEAVY) return;
  expect(used).toEqual([intended]);
  expectOrderFromIndex(plan);
}

describe('query plans on a 300,000-row notification table', () => {
  const users = ['u42', HEAVY];

  it('the list page (any page) reads the user index, for its rows and its total', async () => {
    for (const user of users) {
      // Page 50 reads its ids from the index first (the deferred form of deep pages). A known total (the read
      // cache's, unread-cache.ts) leaves the count out: the rows alone, from the same index.
      for (const page of [1, 2, 5, 50]) {
        for (const known of [null, 1000]) {
          for (const plan of await namedPlansOf(() =>
            repo.list(user, { page, limit: 20, filter: 'all' }, undefined, known),
          )) {
            expectNoScanOfWholeTable(plan);
            expectPage(plan, user, 'notification_user_created_desc_idx');
          }
        }
      }
    }
  });

  it('the unread list reads the partial unread index', async () => {
    for (const user of users) {
      for (const known of [null, 1000]) {
        for (const plan of await namedPlansOf(() =>
          repo.list(user, { page: 2, limit: 20, filter: 'unread' }, undefined, known),
        )) {
          expectNoScanOfWholeTable(plan);
          expectPage(plan, user, 'notification_user_unread_desc_idx');
        }
      }
    }
  });

  it('the list filtered by type reads the (user, type, created_at desc, id desc) index', async () => {
    for (const user of users) {
      for (const plan of await namedPlansOf(() =>
        repo.list(user, { page: 2, limit: 20, filter: 'all', type: 'warning' }),
      )) {
        expectNoScanOfWholeTable(plan);
        expectPage(plan, user, 'notification_user_type_created_desc_idx');
      }
    }
  });

  it('pages read together (one statement, page-batch.ts), deep ones too, read each user’s intended index, in its order', async () => {
    const cases = [
      { filter: 'all', page: 2, intended: 'notification_user_created_desc_idx' },
      { filter: 'unread', page: 2, intended: 'notification_user_unread_desc_idx' },
      { filter: 'all', page: 2, type: 'warning', intended: 'notification_user_type_created_desc_idx' },
      // Deep pages: the ids from the index first (the deferred form), then the page's rows by key.
      { filter: 'all', page: 50, intended: 'notification_user_created_desc_idx' },
    ] as const;
    for (const [{ intended, ...q }, known] of cases.flatMap(
      (c) =>
        [
          [c, null],
          [c, 1000],
        ] as const,
    )) {
      const plans = await plansOf(() =>
        Promise.all(
          [HEAVY, 'u42', 'u7'].map((user) => repo.list(user, { limit: 20, ...q }, undefined, known)),
        ),
      );
      // With the totals known (the read cache's), the statement reads rows only.
      expect(captured.map((c) => /count\(/.test(c.query))).toEqual([known === null]);
      // The three pages arrived in one turn of the event loop: one named statement read them all.
      expect(captured.map((c) => [c.named, /unnest\(/.test(c.query)])).toEqual([[true, true]]);
      expect(plans).toHaveLength(2);
      for (const plan of plans) {
        expectNoScanOfWholeTable(plan);
        // One plan serves every user of the statement, the heavy one too: the order must come from the index.
        expect(pageIndexes(plan)).toEqual([intended]);
        expectOrderFromIndex(plan);
      }
    }
  });

  it('a search walks the user’s own index range and filters it (no table-wide or trigram index)', async () => {
    // Search has no index of its own (migration 0016): retention bounds a user's rows, and their index range
    // filtered beat the trigram indexes for such a user. A plan over every user's rows would be the regression.
    for (const user of users) {
      for (const search of ['content 42', 'no such words']) {
        for (const plan of await namedPlansOf(() =>
          repo.list(user, { page: 1, limit: 20, filter: 'all', search }),
        )) {
          expectNoScanOfWholeTable(plan);
          for (const name of indexesUsed(plan)) expect(name).toMatch(/^notification_user_/);
          expect(indexesUsed(plan).length).toBeGreaterThan(0);
        }
      }
    }
  });

  it('the counts read the user’s entries of one index only', async () => {
    for (const user of users) {
      for (const plan of await namedPlansOf(() => repo.counts(user))) {
        expectNoScanOfWholeTable(plan);
        expect(indexesUsed(plan)).toHaveLength(1);
      }
    }
  });

  it('the SSE resume reads the event log by its (user_id, seq) key', async () => {
    for (const user of users) {
      const plans = await plansOf(async () => {
        await repo.cursor(user);
        await repo.eventsAfter(user, 10, 500);
      });
      expect(plans).toHaveLength(2);
      for (const plan of plans) {
        expectNoScanOfWholeTable(plan);
        expect(indexesUsed(plan)).toContain('notification_event_user_id_seq_pk');
      }
      const resume = plans[1];
      if (user === HEAVY && resume) expectOrderFromIndex(resume);
    }
  });
});
