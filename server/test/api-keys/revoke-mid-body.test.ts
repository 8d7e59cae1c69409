// A revoked API key stops working before the DELETE returns (CONTRACT §9), including for a request whose headers,
// and so the key check, came before the revocation but whose body is completed after it. The key is checked in
// onRequest (before a body of up to 4 MiB is read) and, since this test, again once the body has arrived when that
// took CONFIRM_AFTER_MS or longer: before, such a request still sent its notification (every round, from outside). Two instances on one database; a real
// HTTP client on loopback holds the body back. A send whose creator was demoted meanwhile is refused the same way.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIRM_AFTER_MS } from '../../src/api-keys/service.js';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, requestAs, type TestUser } from '../helpers/users.js';

describe('API key checked again once the body has arrived', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  let admin: TestUser;
  let member: TestUser;

  beforeAll(async () => {
    env = await createTestEnv({ API_KEY_LAST_USED_FLUSH_MS: '10' });
    [a, b] = await Promise.all([env.app(), env.app()]);
    await b.listen({ port: 0, host: '127.0.0.1' });
    [admin, member] = await Promise.all([createAdmin(a, env.smtp), createVerifiedUser(a, env.smtp)]);
  });
  afterAll(async () => {
    await env?.close();
  });

  const db = () => a.ctx.database.db;
  const createKey = async (creator: TestUser) => {
    const res = await requestAs(a, creator, 'POST', '/admin/api-keys', {
      name: 'slow body',
      scopes: ['notifications:send'],
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; key: string };
  };
  /** Starts a send on instance b with its headers and 10 bytes of body; `finish` sends the rest. */
  const startSlowSend = (key: string, title: string) => {
    const body = Buffer.from(
      JSON.stringify({
        target: { scope: 'user', identifier: member.id },
        notification: { type: 'announcement', title, content: 'x', deliveryOptions: { strategies: ['sse'] } },
      }),
    );
    let finish = () => {};
    const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: (b.server.address() as AddressInfo).port,
          method: 'POST',
          path: '/admin/notifications/send',
          headers: {
            'content-type': 'application/json',
            'content-length': String(body.length),
            authorization: `Bearer ${key}`,
          },
        },
        (res) => {
          let text = '';
          res.on('data', (c) => {
            text += c;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.flushHeaders();
      req.write(body.subarray(0, 10));
      finish = () => req.end(body.subarray(10));
    });
    return { answer, finish: () => finish() };
  };
  /**
   * The key check of instance b has run once the key's use is recorded; the body is then held back longer than
   * CONFIRM_AFTER_MS, as a client that means to act after a revocation would.
   */
  const keyChecked = async (id: string) => {
    await expect
      .poll(
        async () =>
          rowsOf<{ used: boolean }>(
            await db().execute(
              sql`select last_used_at is not null as used from api_key where id = ${id}::uuid`,
            ),
          )[0]?.used,
        { timeout: 20_000 },
      )
      .toBe(true);
    await new Promise((resolve) => setTimeout(resolve, CONFIRM_AFTER_MS + 20));
  };
  const sentTitled = async (title: string) =>
    rowsOf<{ n: number }>(
      await db().execute(sql`select count(*)::int as n from notification where title = ${title}`),
    )[0]?.n;

  it('a key revoked while the body was on its way sends nothing: 401', async () => {
    const { id, key } = await createKey(admin);
    const title = `revoked mid-body ${randomUUID()}`;
    const send = startSlowSend(key, title);
    await keyChecked(id);
    const revoked = await requestAs(a, admin, 'DELETE', `/admin/api-keys/${id}`);
    expect(revoked.statusCode, revoked.body).toBe(200);
    send.finish();
    const res = await send.answer;
    expect(res.status, res.text).toBe(401);
    expect(JSON.parse(res.text)).toMatchObject({ code: 'UNAUTHORIZED' });
    expect(await sentTitled(title)).toBe(0);
  });

  it('a key whose creator was demoted while the body was on its way sends nothing: 401', async () => {
    const creator = await createAdmin(a, env.smtp);
    const { id, key } = await createKey(creator);
    const title = `demoted mid-body ${randomUUID()}`;
    const send = startSlowSend(key, title);
    await keyChecked(id);
    const demoted = await requestAs(a, admin, 'POST', '/auth/admin/set-role', {
      userId: creator.id,
      role: 'user',
    });
    expect(demoted.statusCode, demoted.body).toBe(200);
    send.finish();
    const res = await send.answer;
    expect(res.status, res.text).toBe(401);
    expect(await sentTitled(title)).toBe(0);
  });

  it('a key still valid once the body has arrived sends as usual', async () => {
    const { id, key } = await createKey(admin);
    const title = `valid slow body ${randomUUID()}`;
    const send = startSlowSend(key, title);
    await keyChecked(id);
    send.finish();
    const res = await send.answer;
    expect(res.status, res.text).toBe(200);
    expect(await sentTitled(title)).toBe(1);
  });
});
