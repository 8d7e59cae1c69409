// Herald behind a stock PgBouncer in transaction pooling mode (CONTRACT §7), with DATABASE_URL alone (no
// DATABASE_DIRECT_URL: everything, migrations included, goes through the pooler). Before the fix the service exited
// at start (`unsupported startup parameter: statement_timeout`). The multi-instance suites run this way in CI with
// HERALD_TEST_PGBOUNCER=1 (helpers/pgbouncer.ts).
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { preparedStatementsEnabled } from '../../src/infra/prepared-statements.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { PGBOUNCER_BIN, startPgBouncer, type TestPgBouncer } from '../helpers/pgbouncer.js';
import { createVerifiedUser, jsonHeaders } from '../helpers/users.js';

describe.skipIf(!PGBOUNCER_BIN)('behind PgBouncer (pool_mode = transaction)', () => {
  let env: TestEnv;
  let bouncer: TestPgBouncer;
  let apps: App[];

  beforeAll(async () => {
    env = await createTestEnv();
    // Two server connections for everything: sessions could not hide behind one connection each.
    bouncer = await startPgBouncer({ poolSize: 2 });
    const viaBouncer = {
      DATABASE_URL: bouncer.urlFor(env.db.url),
      DATABASE_DIRECT_URL: '',
      DATABASE_STATEMENT_TIMEOUT_MS: '1000',
    };
    // Two instances starting at once against a fresh database: both migrate under the transaction-level lock.
    apps = await Promise.all([env.app(viaBouncer), env.app(viaBouncer)]);
  }, 120_000);
  afterAll(async () => {
    await env?.close();
    await bouncer?.close();
  });

  it('starts (migrations through the pooler, no startup parameter it refuses) and serves the notification API', async () => {
    const [a, b] = apps;
    if (!a || !b) throw new Error('apps not built');
    const user = await createVerifiedUser(a, env.smtp);
    await a.notifications.createForUser(user.id, { type: 'info', title: 'through the pooler', content: 'x' });
    const listed = await b.inject({
      method: 'GET',
      url: '/notification/list',
      headers: jsonHeaders(user.cookie),
    });
    expect(listed.statusCode).toBe(200);
    const body = listed.json() as { notifications: Array<{ id: string; title: string }> };
    expect(body.notifications.map((n) => n.title)).toEqual(['through the pooler']);
    const id = body.notifications[0]?.id;
    const marked = await b.inject({
      method: 'PATCH',
      url: `/notification/${id}/read`,
      headers: jsonHeaders(user.cookie),
      payload: { read: true },
    });
    expect(marked.statusCode).toBe(200);
    const counts = await a.inject({
      method: 'GET',
      url: '/notification/counts',
      headers: jsonHeaders(user.cookie),
    });
    expect((counts.json() as { counts: { byStatus: unknown } }).counts.byStatus).toEqual({
      all: 1,
      read: 1,
      unread: 0,
    });
    expect(bouncer.log()).not.toMatch(/pooler error: (?!unsupported startup parameter: statement_timeout)/);
    // Found to be a pooler at start-up: the hot reads run unnamed (a named statement would not follow the client
    // to another server connection).
    expect(preparedStatementsEnabled(a.ctx.database.db)).toBe(false);
  });

  it('still bounds a stuck query (client-side, as the pooler refuses the server-side parameter)', async () => {
    const [a] = apps;
    if (!a) throw new Error('apps not built');
    // Without a bound this would answer after 30 s (beyond the test's time limit) instead of failing.
    const failure = await a.ctx.database.db.execute(sql`select pg_sleep(30)`).then(
      () => undefined,
      (err: unknown) => err as Error & { cause?: Error },
    );
    expect(`${failure?.message} ${failure?.cause?.message}`).toMatch(/timeout/i);
    // The pool is usable afterwards.
    await a.ctx.database.ping();
  });
});
