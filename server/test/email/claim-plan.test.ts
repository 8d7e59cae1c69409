// The outbox and digest claims must read their rows off the due index, never sort the backlog: rows queued by one
// statement share next_attempt_at, and with an index on that column alone every claim of 20 sorted every pending
// row (90 ms at 100,000 rows; a 100,000-email drain slowed down as it went — docs/performance.md "Outbox drain").
// Checked on the real PostgreSQL planner with a backlog that shares one next_attempt_at, as a broadcast's leaves.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { dueDigestRows } from '../../src/email/digest.js';
import { rowsOf } from '../../src/infra/db.js';
import { dueOutboxRows } from '../../src/infra/email-outbox.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';

const BACKLOG = 20_000;

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

describe('claim plans: the due index in the claim order', () => {
  let env: TestEnv;
  let app: App;

  const plan = async (query: ReturnType<typeof sql>) => {
    const [row] = rowsOf<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      await app.ctx.database.db.execute(sql`explain (format json) ${query}`),
    );
    const root = row?.['QUERY PLAN'][0]?.Plan;
    if (!root) throw new Error('no plan');
    return nodes(root);
  };

  beforeAll(async () => {
    env = await createTestEnv();
    // The workers stay off: the backlog must still be pending when the claim is planned.
    app = await env.app({ EMAIL_QUEUE_POLL_MS: '3600000' });
    await app.ctx.outbox.stop();
    await app.ctx.email.digests.stop();
    const db = app.ctx.database.db;
    await db.execute(sql`
      insert into email_outbox (dedupe_key, to_address, subject, text_body, html_body)
      select 'notification:plan-' || g, 'plan' || g || '@example.test', 'Subject', 'Text', '<p>Html</p>'
      from generate_series(1, ${BACKLOG}::int) g`);
    await db.execute(sql`
      insert into "user" (id, name, email, email_verified, created_at, updated_at)
      select 'plan-' || g, 'Plan ' || g, 'plan' || g || '@example.test', true, now(), now()
      from generate_series(1, ${BACKLOG}::int) g`);
    await db.execute(sql`
      insert into email_digest (user_id, window_start, window_end, next_attempt_at)
      select 'plan-' || g, now() - interval '2 hours', now() - interval '1 hour', now() - interval '1 hour'
      from generate_series(1, ${BACKLOG}::int) g`);
    await db.execute(sql`analyze email_outbox`);
    await db.execute(sql`analyze email_digest`);
  }, 120_000);

  afterAll(async () => {
    await env?.close();
  });

  it('the outbox claim reads email_outbox_due_idx in order and sorts nothing', async () => {
    const found = await plan(dueOutboxRows(20));
    expect(found.map((n) => n['Node Type'])).not.toContain('Sort');
    expect(found.map((n) => n['Node Type'])).not.toContain('Incremental Sort');
    expect(found.some((n) => n['Index Name'] === 'email_outbox_due_idx')).toBe(true);
  });

  it('the digest claim reads email_digest_due_idx in order and sorts nothing', async () => {
    const found = await plan(dueDigestRows(20));
    expect(found.map((n) => n['Node Type'])).not.toContain('Sort');
    expect(found.map((n) => n['Node Type'])).not.toContain('Incremental Sort');
    expect(found.some((n) => n['Index Name'] === 'email_digest_due_idx')).toBe(true);
  });

  it('a claim through the outbox API still takes the oldest rows first', async () => {
    const db = app.ctx.database.db;
    const claimed = rowsOf<{ dedupe_key: string }>(
      await db.execute(
        sql`select dedupe_key from email_outbox where id in (${dueOutboxRows(3)}) order by id`,
      ),
    );
    expect(claimed.map((r) => r.dedupe_key)).toEqual([
      'notification:plan-1',
      'notification:plan-2',
      'notification:plan-3',
    ]);
  });
});
