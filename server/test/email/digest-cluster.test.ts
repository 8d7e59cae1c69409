// Exactly one digest per user and window with two instances (child processes) and one of them restarted inside
// the window: the schedule lives in PostgreSQL, not in a process's timer (CONTRACT §12).
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLUSTER_ORIGIN,
  createVerifiedUserOn,
  FAST_TIMINGS,
  startCluster,
  type TestCluster,
} from '../helpers/cluster.js';

// Long enough for a restart of a tsx child process on a loaded CI machine to fit inside one window.
const WINDOW_MS = 60_000;
const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('digests across instances and restarts', () => {
  let cluster: TestCluster;
  let admin: { cookie: string };
  const json = { 'content-type': 'application/json', origin: CLUSTER_ORIGIN };

  const send = async (i: number, email: string, title: string) => {
    const res = await fetch(`${cluster.url(i)}/admin/notifications/send`, {
      method: 'POST',
      headers: { ...json, cookie: admin.cookie },
      body: JSON.stringify({
        target: { scope: 'user', identifier: email },
        notification: { type: 'mention', title, content: `content of ${title}` },
      }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
  };
  const query = async <T extends pg.QueryResultRow>(text: string, values: unknown[]) => {
    const client = new pg.Client({ connectionString: cluster.db.url });
    await client.connect();
    try {
      return (await client.query<T>(text, values)).rows;
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      redis: 'shared',
      env: {
        ...FAST_TIMINGS,
        ADMIN_EMAILS: 'chief@example.test',
        APP_NAME: 'Acme',
        EMAIL_QUEUE_POLL_MS: '100',
        EMAIL_DIGEST_HOURLY_MS: String(WINDOW_MS),
        // Nothing here is about store outages: a loaded machine must not turn a slow Redis reply into "degraded".
        CACHE_COMMAND_TIMEOUT_MS: '10000',
      },
    });
    admin = await createVerifiedUserOn(cluster, 0, { email: 'chief@example.test' });
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it(
    'sends exactly one digest for the window, whatever instance scheduled or restarted',
    async () => {
      const user = await createVerifiedUserOn(cluster, 1);
      const patch = await fetch(`${cluster.url(1)}/notification/preferences`, {
        method: 'PATCH',
        headers: { ...json, cookie: user.cookie },
        body: JSON.stringify({ emailDigest: 'hourly' }),
      });
      expect(patch.status).toBe(200);
      // Start early in a window, so both sends and the restart fall inside it.
      while (Date.now() % WINDOW_MS > WINDOW_MS / 10) await settle(50);
      const windowEnd = Math.floor(Date.now() / WINDOW_MS) * WINDOW_MS + WINDOW_MS;

      await send(0, user.email, 'from zero');
      await send(1, user.email, 'from one');
      await send(0, user.email, 'again from zero');
      // Instance 1 goes away and comes back inside the window.
      await cluster.restart(1);
      const restartedInside = Date.now() < windowEnd;

      const isDigest = (m: { to: string[]; subject: string }) =>
        m.to.includes(user.email) && m.subject.startsWith('Your Acme digest');
      const digest = await cluster.smtp.waitFor(isDigest, WINDOW_MS * 2);
      expect(digest.subject).toBe('Your Acme digest: 3 unread notifications');
      for (const title of ['from zero', 'from one', 'again from zero']) expect(digest.text).toContain(title);
      // No one-by-one emails besides.
      expect(
        cluster.smtp.messages.filter((m) => m.to.includes(user.email) && m.subject.includes('from')),
      ).toEqual([]);

      // Let both instances poll a few more rounds: still one row, one outbox email, one message.
      for (let i = 0; i < 100; i++) {
        const pending = await query<{ n: number }>(
          `select count(*)::int as n from email_outbox where status = 'pending'`,
          [],
        );
        if (pending[0]?.n === 0) break;
        await settle(50);
      }
      await settle(1_000);
      expect(await query(`select status from email_digest where user_id = $1`, [user.id])).toEqual([
        { status: 'sent' },
      ]);
      expect(
        await query<{ n: number }>(`select count(*)::int as n from email_outbox where dedupe_key like $1`, [
          `digest:${user.id}@%`,
        ]),
      ).toEqual([{ n: 1 }]);
      expect(cluster.smtp.messages.filter(isDigest)).toHaveLength(1);
      expect(restartedInside, 'the restart finished inside the window').toBe(true);
      // Waiting for the start of a window (up to 0.9 window) and then for its end (one window) and the send: the
      // default test timeout is shorter than that, so the test failed whenever it started late in a window.
    },
    4 * WINDOW_MS,
  );
});
