// rotate-secret against the worker's already claimed rows, and concurrent rotations (CONTRACT §9): after
// rotate-secret returns, deliveries carry both signatures (old and new) for 24 h, so a receiver that switched to
// the secret the rotation returned verifies every delivery sent afterwards. Rows claimed before the rotation used to
// go out signed with the old secret alone (every buffered row, every round) until they were handed back like after
// a PATCH. One send slot per endpoint and a receiver that holds the first request keep rows in the buffer.
import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';
import {
  bodyOf,
  resetWebhooks,
  startReceiver,
  verifySignature,
  type WebhookReceiver,
} from '../helpers/webhook-receiver.js';

const ROUNDS = 3;

describe('rotate-secret', () => {
  let env: TestEnv;
  let app: App;
  let admin: TestUser;
  let user: TestUser;
  let receiver: WebhookReceiver;

  const call = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: Record<string, unknown>) => {
    const headers = jsonHeaders(admin.cookie);
    if (payload === undefined) delete headers['content-type'];
    return app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload }) });
  };
  const sendTo = (title: string) =>
    call('POST', '/admin/notifications/send', {
      target: { scope: 'user', identifier: user.id },
      notification: {
        type: 'announcement',
        title,
        content: 'probe',
        deliveryOptions: { strategies: ['sse'] },
      },
    });
  const titleOf = (r: { body: string }) => (bodyOf(r as never).data as { title?: string }).title;

  beforeAll(async () => {
    env = await createTestEnv({
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_QUEUE_POLL_MS: '50',
      WEBHOOK_RETRY_BASE_MS: '50',
      WEBHOOK_TIMEOUT_MS: '30000',
      WEBHOOK_CONCURRENCY_PER_ENDPOINT: '1',
    });
    app = await env.app();
    await app.listen({ port: 0, host: '127.0.0.1' });
    [admin, user] = await Promise.all([createAdmin(app, env.smtp), createVerifiedUser(app, env.smtp)]);
    receiver = await startReceiver();
  });
  afterEach(() => resetWebhooks(app, receiver));
  afterAll(async () => {
    await receiver?.close();
    await env?.close();
  });

  it(`every delivery sent after rotate-secret returned verifies with the new secret (${ROUNDS} rounds)`, async () => {
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const res = await call('POST', '/admin/webhooks', {
        url: receiver.url(`/rot${round}`),
        events: ['notification.created'],
      });
      const hook = res.json() as { id: string; secret: string };
      // One send slot: the first delivery hangs, the next ones are claimed into the worker's buffer.
      receiver.respond = () => 'hang';
      const titles = Array.from({ length: 4 }, (_, i) => `rot${round} ${i}`);
      for (const t of titles) expect((await sendTo(t)).statusCode).toBe(200);
      await receiver.until((all) => all.some((r) => r.path === `/rot${round}`));
      // Wait until every row is claimed (leased) by the worker.
      await expect
        .poll(
          async () =>
            rowsOf<{ n: number }>(
              await app.ctx.database.db.execute(
                sql`select count(*)::int as n from webhook_delivery
                    where endpoint_id = ${hook.id}::uuid and locked_until is not null`,
              ),
            )[0]?.n,
          { timeout: 20_000 },
        )
        .toBe(titles.length);
      const rotated = await call('POST', `/admin/webhooks/${hook.id}/rotate-secret`);
      expect(rotated.statusCode).toBe(200);
      const { secret } = rotated.json() as { secret: string };
      const sentBefore = receiver.received.length;
      receiver.releaseHung();
      await receiver.until((all) =>
        titles.every((t) => all.some((r) => r.answered === 200 && titleOf(r) === t)),
      );
      for (const r of receiver.received.slice(sentBefore).filter((x) => x.path === `/rot${round}`)) {
        if (!verifySignature(secret, r)) {
          failures.push(
            `round ${round} '${titleOf(r)}': sent after rotate returned, signature ${r.signature.split(' ').length} part(s), not verifiable with the new secret (old verifies: ${verifySignature(hook.secret, r)})`,
          );
        }
      }
      await resetWebhooks(app);
    }
    expect(failures).toEqual([]);
  }, 120_000);

  it('12 concurrent rotations: the current and previous secrets are two of the returned ones (3 rounds)', async () => {
    const failures: string[] = [];
    for (let round = 0; round < 3; round++) {
      const res = await call('POST', '/admin/webhooks', {
        url: receiver.url(`/conc${round}`),
        events: ['notification.created'],
      });
      const hook = res.json() as { id: string; secret: string };
      const results = await Promise.all(
        Array.from({ length: 12 }, () => call('POST', `/admin/webhooks/${hook.id}/rotate-secret`)),
      );
      const secrets = results.map((r) => {
        expect(r.statusCode).toBe(200);
        return (r.json() as { secret: string }).secret;
      });
      expect(new Set(secrets).size).toBe(12);
      const test = await call('POST', `/admin/webhooks/${hook.id}/test`);
      const { id } = test.json() as { id: string };
      await receiver.until((all) => all.some((r) => r.id === id));
      const got = receiver.received.find((r) => r.id === id);
      if (!got) throw new Error('no delivery');
      const parts = got.signature.split(' ');
      const signers = parts.map((p) =>
        secrets.findIndex((s) => verifySignature(s, { ...got, signature: p })),
      );
      if (parts.length !== 2 || signers.includes(-1) || signers[0] === signers[1])
        failures.push(`round ${round}: ${parts.length} signatures, signers ${JSON.stringify(signers)}`);
      await resetWebhooks(app);
    }
    expect(failures).toEqual([]);
  }, 120_000);
});
