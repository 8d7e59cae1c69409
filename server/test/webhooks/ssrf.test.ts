// SSRF rules with WEBHOOK_ALLOW_PRIVATE_URLS=false (the production default): private, loopback, link-local,
// CGNAT, unique-local, IPv4-mapped and metadata addresses refused at creation (literal or resolved), and at
// delivery when the DNS answer changes after creation (rebinding). The resolver is injected — the one failure
// a test cannot produce for real — and deliveries that keep failing are given up after the retry window.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { rowsOf } from '../../src/infra/db.js';
import { isPrivateAddress, type ResolvedAddress } from '../../src/webhooks/ssrf.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, jsonHeaders, type TestUser } from '../helpers/users.js';
import { startReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const PUBLIC_V4 = '93.184.216.34';

describe('webhook SSRF protection', () => {
  let env: TestEnv;
  let app: App;
  let admin: TestUser;
  let user: TestUser;
  let rx: WebhookReceiver;
  /** Host → the answers the resolver gives, one per call (the last one repeats). */
  const dns = new Map<string, ResolvedAddress[][]>();
  const resolve = async (host: string): Promise<ResolvedAddress[]> => {
    const answers = dns.get(host);
    if (!answers || answers.length === 0) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
    return (answers.length > 1 ? answers.shift() : answers[0]) as ResolvedAddress[];
  };
  const v4 = (address: string): ResolvedAddress => ({ address, family: 4 });

  const create = (url: string) =>
    app.inject({
      method: 'POST',
      url: '/admin/webhooks',
      headers: jsonHeaders(admin.cookie),
      payload: { url, events: ['notification.created'] },
    });

  beforeAll(async () => {
    env = await createTestEnv({
      WEBHOOK_QUEUE_POLL_MS: '50',
      WEBHOOK_RETRY_BASE_MS: '20',
      WEBHOOK_RETRY_WINDOW_MS: '1500',
    });
    app = await env.app({}, { webhookResolver: resolve });
    [admin, user] = await Promise.all([createAdmin(app, env.smtp), createVerifiedUser(app, env.smtp)]);
    rx = await startReceiver();
  });
  afterAll(async () => {
    await rx?.close();
    await env?.close();
  });

  it('classifies addresses', () => {
    for (const a of [
      '127.0.0.1',
      '10.0.0.1',
      '172.16.5.4',
      '192.168.1.1',
      '100.64.0.1',
      '169.254.169.254',
      '0.0.0.0',
      '255.255.255.255',
      '224.0.0.1',
      '::1',
      '::',
      '::ffff:127.0.0.1',
      '::ffff:8.8.8.8',
      'fe80::1',
      'fc00::1',
      'fd00:ec2::254',
      'ff02::1',
    ])
      expect(isPrivateAddress(a), a).toBe(true);
    for (const a of [PUBLIC_V4, '8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '2a00:1450:4001::200e'])
      expect(isPrivateAddress(a), a).toBe(false);
  });

  it('refuses private targets at creation with 400', async () => {
    dns.set('localhost', [[v4('127.0.0.1')]]);
    dns.set('mixed.example.test', [[v4(PUBLIC_V4), v4('10.0.0.7')]]);
    dns.set('metadata.example.test', [[{ address: 'fd00:ec2::254', family: 6 }]]);
    for (const url of [
      `http://127.0.0.1:${rx.port}/hook`,
      'http://localhost/hook',
      'http://[::1]/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://[fd00:ec2::254]/',
      'http://metadata.example.test/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:7f00:1]/',
      'http://100.64.1.2/',
      'http://10.1.2.3/',
      'http://0.0.0.0/',
      'http://[fe80::1]/',
      'http://2130706433/',
      'http://mixed.example.test/',
      'http://unknown-host.example.test/',
    ]) {
      const res = await create(url);
      expect(res.statusCode, url).toBe(400);
      expect(res.json(), url).toMatchObject({ code: 'VALIDATION_ERROR' });
    }
    const rows = rowsOf<{ n: number }>(
      await app.ctx.database.db.execute(sql`select count(*)::int as n from webhook_endpoint`),
    );
    expect(rows[0]?.n).toBe(0);
  });

  it('refuses at delivery when the DNS answer turned private (rebinding), then gives up after the window', async () => {
    // Public when checked at creation, loopback (where the receiver listens) when the worker resolves it.
    dns.set('rebind.example.test', [[v4(PUBLIC_V4)], [v4('127.0.0.1')]]);
    const res = await create(`http://rebind.example.test:${rx.port}/hook`);
    expect(res.statusCode, res.body).toBe(201);
    const { id } = res.json() as { id: string };
    const sent = await app.inject({
      method: 'POST',
      url: '/admin/notifications/send',
      headers: jsonHeaders(admin.cookie),
      payload: {
        target: { scope: 'user', identifier: user.id },
        notification: { type: 'announcement', title: 'rebind', content: 'x' },
      },
    });
    expect(sent.statusCode).toBe(200);
    let last: Record<string, unknown> | undefined;
    for (let i = 0; i < 400 && last?.status !== 'failed'; i++) {
      await new Promise((r) => setTimeout(r, 50));
      const list = await app.inject({
        method: 'GET',
        url: `/admin/webhooks/${id}/deliveries`,
        headers: { cookie: admin.cookie },
      });
      last = (list.json() as { deliveries: Array<Record<string, unknown>> }).deliveries[0];
    }
    expect(last).toMatchObject({ status: 'failed', statusCode: null, nextRetryAt: null });
    expect(String(last?.error)).toMatch(
      /refused: resolves to a private or reserved address \(127\.0\.0\.1\)/,
    );
    expect(Number(last?.attempt)).toBeGreaterThanOrEqual(1);
    expect(rx.received).toHaveLength(0);
  });
});
