// Managing webhook endpoints without recreating them (CONTRACT §9), against a real HTTP receiver on loopback:
// PATCH (events, URL, description, enabled — a disabled endpoint gets nothing until enabled, then its queued
// deliveries), secret rotation (both signatures for the grace period, checked by the receiver's own HMAC),
// the webhook.test event, redelivery with the same webhook-id, and bad or unauthorised input on every route.
import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';
import {
  bodyOf,
  resetWebhooks,
  startReceiver,
  verifySignature,
  type WebhookReceiver,
} from '../helpers/webhook-receiver.js';

interface Hook {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  secret?: string;
}

describe('webhook management', () => {
  let env: TestEnv;
  let app: App;
  let admin: TestUser;
  let user: TestUser;
  let receiver: WebhookReceiver;

  const call = (
    method: 'GET' | 'POST' | 'PATCH',
    url: string,
    payload?: Record<string, unknown>,
    cookie: string | null = admin.cookie,
  ) => {
    const headers = jsonHeaders(cookie ?? undefined);
    // A bodiless POST sends no Content-Type (an empty JSON body is refused as INVALID_JSON).
    if (payload === undefined) delete headers['content-type'];
    return app.inject({ method, url, headers, ...(payload === undefined ? {} : { payload }) });
  };
  const createHook = async (events: string[], path = '/hook'): Promise<Hook> => {
    const res = await call('POST', '/admin/webhooks', { url: receiver.url(path), events });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as Hook;
  };
  const sendTo = (title: string) =>
    call('POST', '/admin/notifications/send', {
      target: { scope: 'user', identifier: user.id },
      notification: { type: 'announcement', title, content: 'management test' },
    });
  const titled = (title: string) => (all: typeof receiver.received) =>
    all.some(
      (r) =>
        bodyOf(r).type === 'notification.created' && (bodyOf(r).data as { title?: string }).title === title,
    );

  beforeAll(async () => {
    env = await createTestEnv({
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_QUEUE_POLL_MS: '50',
      WEBHOOK_RETRY_BASE_MS: '50',
      WEBHOOK_TIMEOUT_MS: '5000',
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

  it('PATCH changes events and description, keeps the secret, and is applied before it returns', async () => {
    const hook = await createHook(['notification.read']);
    const res = await call('PATCH', `/admin/webhooks/${hook.id}`, {
      events: ['notification.created', 'notification.created'],
      description: 'billing',
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      id: hook.id,
      events: ['notification.created'],
      description: 'billing',
      enabled: true,
    });
    expect(res.json()).not.toHaveProperty('secret');
    expect((await sendTo('after patch')).statusCode).toBe(200);
    await receiver.until(titled('after patch'));
    const got = receiver.received.find((r) => bodyOf(r).type === 'notification.created');
    expect(got && verifySignature(hook.secret as string, got)).toBe(true);
    const cleared = await call('PATCH', `/admin/webhooks/${hook.id}`, { description: null });
    expect(cleared.json()).toMatchObject({ description: null });
  });

  it('a disabled webhook is offered nothing; enabled again, it gets new events', async () => {
    const hook = await createHook(['notification.created']);
    expect((await call('PATCH', `/admin/webhooks/${hook.id}`, { enabled: false })).json()).toMatchObject({
      enabled: false,
    });
    expect(app.ctx.events.wants('notification.created')).toBe(false);
    expect((await sendTo('while disabled')).statusCode).toBe(200);
    expect((await call('PATCH', `/admin/webhooks/${hook.id}`, { enabled: true })).statusCode).toBe(200);
    expect((await sendTo('enabled again')).statusCode).toBe(200);
    await receiver.until(titled('enabled again'));
    expect(titled('while disabled')(receiver.received)).toBe(false);
  });

  it('queued deliveries of a disabled webhook wait, and go out once it is enabled', async () => {
    const hook = await createHook(['notification.created']);
    receiver.respond = () => 500;
    expect((await sendTo('held back')).statusCode).toBe(200);
    await receiver.until(titled('held back'));
    expect((await call('PATCH', `/admin/webhooks/${hook.id}`, { enabled: false })).statusCode).toBe(200);
    // A retry claimed before the disable committed may still arrive (on a loaded machine the PATCH can take
    // longer than the ~100 ms retry delay): it is refused too, so the delivery stays queued.
    await new Promise((r) => setTimeout(r, 600));
    receiver.respond = () => 200;
    receiver.received.length = 0;
    // The retry is due within ~100 ms; a disabled endpoint's row is not claimed however long it waits.
    await new Promise((r) => setTimeout(r, 600));
    expect(receiver.received).toHaveLength(0);
    expect((await call('PATCH', `/admin/webhooks/${hook.id}`, { enabled: true })).statusCode).toBe(200);
    await receiver.until(titled('held back'));
  });

  it('deliveries claimed before a PATCH url go to the new URL, not the old one', async () => {
    const hook = await createHook(['notification.created'], '/before');
    // Every request to the old URL hangs: the endpoint's 4 send slots fill, and the worker claims the rest into
    // its buffer with the old URL.
    receiver.respond = () => 'hang';
    const titles = Array.from({ length: 8 }, (_, i) => `moved ${i}`);
    for (const title of titles) expect((await sendTo(title)).statusCode).toBe(200);
    await receiver.until((all) => all.filter((r) => r.path === '/before').length >= 4);
    const patched = await call('PATCH', `/admin/webhooks/${hook.id}`, { url: receiver.url('/after') });
    expect(patched.statusCode).toBe(200);
    receiver.releaseHung();
    await receiver.until((all) => titles.every((t) => titled(t)(all.filter((r) => r.answered === 200))));
    const before = receiver.received.filter((r) => r.path === '/before');
    // Only the sends that had started before the change went to the old URL; the buffered ones were handed back
    // and claimed again with the new one.
    expect(before).toHaveLength(4);
    const after = receiver.received.filter((r) => r.path === '/after').map((r) => bodyOf(r).data);
    expect(after).toHaveLength(4);
    const sentBefore = new Set(before.map((r) => (bodyOf(r).data as { title: string }).title));
    for (const data of after) expect(sentBefore.has((data as { title: string }).title)).toBe(false);
  });

  it('PATCH url is checked like a new webhook’s and then used', async () => {
    const hook = await createHook(['notification.created']);
    const refused = await call('PATCH', `/admin/webhooks/${hook.id}`, { url: 'ftp://example.com/x' });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ code: 'VALIDATION_ERROR' });
    const moved = await call('PATCH', `/admin/webhooks/${hook.id}`, { url: receiver.url('/moved') });
    expect(moved.statusCode, moved.body).toBe(200);
    expect((await sendTo('moved')).statusCode).toBe(200);
    await receiver.until(titled('moved'));
  });

  it('rotate-secret: deliveries carry the old and the new signature, old first; the new secret verifies alone', async () => {
    const hook = await createHook(['notification.created']);
    const res = await call('POST', `/admin/webhooks/${hook.id}/rotate-secret`);
    expect(res.statusCode, res.body).toBe(200);
    const { secret } = res.json() as { secret: string };
    expect(secret).toMatch(/^whsec_/);
    expect(secret).not.toBe(hook.secret);
    expect((await sendTo('rotated')).statusCode).toBe(200);
    await receiver.until(titled('rotated'));
    const got = receiver.received.find((r) => titled('rotated')([r]));
    if (!got) throw new Error('no delivery');
    const parts = got.signature.split(' ');
    expect(parts).toHaveLength(2);
    expect(verifySignature(hook.secret as string, { ...got, signature: parts[0] as string })).toBe(true);
    expect(verifySignature(secret, { ...got, signature: parts[1] as string })).toBe(true);
    // Once the grace period is over, only the new signature is sent.
    await app.ctx.database.db.execute(
      sql`update webhook_endpoint set previous_secret_expires_at = now() - interval '1 second' where id = ${hook.id}::uuid`,
    );
    receiver.received.length = 0;
    expect((await sendTo('after grace')).statusCode).toBe(200);
    await receiver.until(titled('after grace'));
    const later = receiver.received.find((r) => bodyOf(r).type === 'notification.created');
    if (!later) throw new Error('no delivery');
    expect(later.signature.split(' ')).toHaveLength(1);
    expect(verifySignature(secret, later)).toBe(true);
    expect(verifySignature(hook.secret as string, later)).toBe(false);
  });

  it('test sends a signed webhook.test to that webhook alone, listed in its deliveries', async () => {
    const hook = await createHook(['user.created']);
    const other = await createHook(['user.created'], '/other');
    const res = await call('POST', `/admin/webhooks/${hook.id}/test`);
    expect(res.statusCode, res.body).toBe(202);
    const { id } = res.json() as { id: string };
    await receiver.until((all) => all.some((r) => r.id === id));
    const got = receiver.received.find((r) => r.id === id);
    if (!got) throw new Error('no test delivery');
    expect(bodyOf(got)).toMatchObject({ type: 'webhook.test', data: { webhookId: hook.id } });
    expect(got.host).toBeTruthy();
    expect(verifySignature(hook.secret as string, got)).toBe(true);
    expect(receiver.received.filter((r) => r.id === id)).toHaveLength(1);
    expect(verifySignature(other.secret as string, got)).toBe(false);
    const list = await call('GET', `/admin/webhooks/${hook.id}/deliveries`);
    expect(list.json()).toMatchObject({ deliveries: [{ id, type: 'webhook.test' }] });
  });

  it('redeliver sends the same event again with the same webhook-id and body', async () => {
    const hook = await createHook(['notification.created']);
    expect((await sendTo('again')).statusCode).toBe(200);
    await receiver.until(titled('again'));
    const first = receiver.received.find((r) => bodyOf(r).type === 'notification.created');
    if (!first) throw new Error('no delivery');
    const res = await call('POST', `/admin/webhooks/${hook.id}/deliveries/${first.id}/redeliver`);
    expect(res.statusCode, res.body).toBe(202);
    await receiver.until((all) => all.filter((r) => r.id === first.id).length === 2);
    const second = receiver.received.filter((r) => r.id === first.id)[1];
    expect(second?.body).toBe(first.body);
    expect(second && verifySignature(hook.secret as string, second)).toBe(true);
  });

  it('bad, unknown and unauthorised input: 4xx in the contract shape, nothing changed', async () => {
    const hook = await createHook(['notification.created']);
    const cases: Array<[string, string, Record<string, unknown> | undefined, number, string]> = [
      ['PATCH', `/admin/webhooks/${hook.id}`, {}, 400, 'VALIDATION_ERROR'],
      ['PATCH', `/admin/webhooks/${hook.id}`, { events: [] }, 400, 'VALIDATION_ERROR'],
      ['PATCH', `/admin/webhooks/${hook.id}`, { events: ['nope'] }, 400, 'VALIDATION_ERROR'],
      ['PATCH', `/admin/webhooks/${hook.id}`, { enabled: 'yes' }, 400, 'VALIDATION_ERROR'],
      ['PATCH', `/admin/webhooks/${hook.id}`, { secret: 'x' }, 400, 'VALIDATION_ERROR'],
      ['PATCH', `/admin/webhooks/${hook.id}`, { description: 'x'.repeat(501) }, 400, 'VALIDATION_ERROR'],
      ['PATCH', '/admin/webhooks/00000000-0000-4000-8000-000000000000', { enabled: false }, 404, 'NOT_FOUND'],
      ['PATCH', '/admin/webhooks/not-a-uuid', { enabled: false }, 404, 'NOT_FOUND'],
      ['POST', '/admin/webhooks/not-a-uuid/rotate-secret', undefined, 404, 'NOT_FOUND'],
      ['POST', '/admin/webhooks/00000000-0000-4000-8000-000000000000/test', undefined, 404, 'NOT_FOUND'],
      ['POST', `/admin/webhooks/${hook.id}/deliveries/msg_unknown/redeliver`, undefined, 404, 'NOT_FOUND'],
      [
        'POST',
        `/admin/webhooks/${hook.id}/deliveries/${'x'.repeat(101)}/redeliver`,
        undefined,
        404,
        'NOT_FOUND',
      ],
    ];
    for (const [method, url, payload, status, code] of cases) {
      const res = await call(method as 'PATCH' | 'POST', url, payload);
      expect(res.statusCode, `${method} ${url} ${JSON.stringify(payload)}: ${res.body}`).toBe(status);
      expect(res.json()).toMatchObject({ code });
    }
    for (const [method, url] of [
      ['PATCH', `/admin/webhooks/${hook.id}`],
      ['POST', `/admin/webhooks/${hook.id}/rotate-secret`],
      ['POST', `/admin/webhooks/${hook.id}/test`],
      ['POST', `/admin/webhooks/${hook.id}/deliveries/msg_x/redeliver`],
    ] as const) {
      const anonymous = await app.inject({
        method,
        url,
        headers: jsonHeaders(undefined),
        payload: { enabled: false },
      });
      expect(anonymous.statusCode, `${method} ${url}`).toBe(401);
      const member = await call(method, url, { enabled: false }, user.cookie);
      expect(member.statusCode, `${method} ${url}`).toBe(403);
    }
    const list = await call('GET', '/admin/webhooks');
    expect(list.json()).toMatchObject({
      webhooks: [{ id: hook.id, enabled: true, events: ['notification.created'] }],
    });
  });
});
