// Issue 22 (4): the last active administrator cannot be lost to a race. Two admins demoting or banning each other
// at the same moment used to both pass the LAST_ADMIN check and leave none; the check is now serialised in
// PostgreSQL, so every round leaves at least one (and exactly one of the two requests is refused). The two
// requests go to two instances sharing the database and the store, as in the report.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, jsonHeaders, type TestUser } from '../helpers/users.js';

const ROUNDS = 10;

describe('the last administrator under concurrency', () => {
  let env: TestEnv;
  let app: App;
  let other: App;
  beforeAll(async () => {
    env = await createTestEnv();
    [app, other] = await Promise.all([env.app(), env.app()]);
  });
  afterAll(() => env.close());

  const activeAdmins = async () =>
    rowsOf<{ n: number }>(
      await app.ctx.database.db.execute(
        sql`select count(*)::int as n from "user" where role = 'admin' and banned is not true`,
      ),
    )[0]?.n ?? -1;

  /** Two fresh admins, and every other admin demoted, so the pair are the only active ones. */
  async function pair(): Promise<[TestUser, TestUser]> {
    const [a, b] = await Promise.all([createAdmin(app, env.smtp), createAdmin(app, env.smtp)]);
    await app.ctx.database.db.execute(
      sql`update "user" set role = 'user' where role = 'admin' and id not in (${a.id}, ${b.id})`,
    );
    expect(await activeAdmins()).toBe(2);
    return [a, b];
  }

  const act = (kind: 'demote' | 'ban', actor: TestUser, target: TestUser, on: App = app) =>
    on.inject({
      method: 'POST',
      url: kind === 'demote' ? '/auth/admin/set-role' : '/auth/admin/ban-user',
      headers: jsonHeaders(actor.cookie),
      payload: kind === 'demote' ? { userId: target.id, role: 'user' } : { userId: target.id },
    });

  const scenarios: Array<[string, 'demote' | 'ban', 'demote' | 'ban']> = [
    ['demote each other', 'demote', 'demote'],
    ['ban each other', 'ban', 'ban'],
    ['one demotes while the other bans', 'demote', 'ban'],
  ];

  it.each(scenarios)(
    `%s: ${ROUNDS} rounds always leave one active admin`,
    async (_, first, second) => {
      for (let round = 0; round < ROUNDS; round++) {
        const [a, b] = await pair();
        const results = await Promise.all([act(first, a, b, app), act(second, b, a, other)]);
        const statuses = results.map((r) => r.statusCode).sort();
        expect(await activeAdmins(), `round ${round}: ${statuses}`).toBe(1);
        // One wins; the other is told why (never a 500).
        expect(statuses, results.map((r) => r.body).join(' | ')).toEqual([200, 400]);
        const refused = results.find((r) => r.statusCode === 400);
        expect(refused?.json()).toMatchObject({ code: 'LAST_ADMIN' });
      }
      // Ten rounds of sign-ups on a shared, loaded machine: a bound against hangs, not a performance threshold.
    },
    240_000,
  );

  it('removing an admin is serialised the same way', async () => {
    for (let round = 0; round < 3; round++) {
      const [a, b] = await pair();
      const results = await Promise.all([
        app.inject({
          method: 'POST',
          url: '/auth/admin/remove-user',
          headers: jsonHeaders(a.cookie),
          payload: { userId: b.id },
        }),
        act('demote', b, a, other),
      ]);
      expect(await activeAdmins(), results.map((r) => `${r.statusCode} ${r.body}`).join(' | ')).toBe(1);
      expect(results.every((r) => r.statusCode < 500)).toBe(true);
    }
  });

  it('a direct SQL demotion of the last admin is refused too (every path, not only the API)', async () => {
    const [a, b] = await pair();
    await app.ctx.database.db.execute(sql`update "user" set role = 'user' where id = ${b.id}`);
    await expect(
      app.ctx.database.db.execute(sql`update "user" set role = 'user' where id = ${a.id}`),
    ).rejects.toThrow();
    expect(await activeAdmins()).toBe(1);
  });
});
