// GET /metrics: access matrix (401/403/200 for key and sessions), the contract's JSON shape with real counters,
// the Prometheus text format, the OpenAPI entry, and a short key refused at start-up.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, type TestUser } from '../helpers/users.js';

const KEY = 'metrics-key-0123456789-0123456789-abcdef';

describe('GET /metrics', () => {
  let env: TestEnv;
  let app: App;
  let admin: TestUser;
  let user: TestUser;
  beforeAll(async () => {
    env = await createTestEnv({ METRICS_API_KEY: KEY });
    app = await env.app();
    [admin, user] = await Promise.all([createAdmin(app, env.smtp), createVerifiedUser(app, env.smtp)]);
  });
  afterAll(async () => {
    await env?.close();
  });

  const get = (headers: Record<string, string> = {}, url = '/metrics') =>
    app.inject({ method: 'GET', url, headers });

  it('answers 401 without credentials', async () => {
    const res = await get();
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ code: 'UNAUTHORIZED' });
  });

  it.each([
    ['a wrong key of the same length', `Bearer ${'x'.repeat(KEY.length)}`],
    ['a wrong short key', 'Bearer nope'],
    ['the key with a suffix', `Bearer ${KEY}x`],
    ['another scheme', `Basic ${Buffer.from(`a:${KEY}`).toString('base64')}`],
    ['an empty bearer', 'Bearer '],
  ])('answers 403 for %s', async (_name, authorization) => {
    const res = await get({ authorization });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ code: 'FORBIDDEN' });
  });

  it('answers 403 to a signed-in non-admin', async () => {
    const res = await get({ cookie: user.cookie });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ code: 'FORBIDDEN' });
  });

  it('serves the contract report to an admin session and to the key, with real counters', async () => {
    const before = (await get({ cookie: admin.cookie })).json() as { pubsub: { messagesPublished: number } };
    for (let i = 0; i < 3; i++) await app.ctx.realtime.bus.publish('test.metrics', { i });
    const res = await get({ authorization: `Bearer ${KEY}` });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json() as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(
      ['bus', 'chat', 'cluster', 'distributedMode', 'email', 'instanceId', 'pubsub', 'timestamp'].sort(),
    );
    // The admin's verification email went through the durable queue.
    expect(body.email).toMatchObject({ pending: 0, failed: 0, attemptFailures: 0 });
    expect((body.email as { sent: number }).sent).toBeGreaterThanOrEqual(1);
    expect(body).toMatchObject({
      instanceId: app.ctx.config.INSTANCE_ID,
      distributedMode: true,
      pubsub: {
        messagesPublished: before.pubsub.messagesPublished + 3,
        publishFailures: 0,
        isDegraded: false,
      },
      chat: { connectedClients: 0 },
      cluster: { activeInstances: 1 },
    });
    const pubsub = body.pubsub as Record<string, unknown>;
    expect(Object.keys(pubsub).sort()).toEqual(
      [
        'averageLatencyMs',
        'isDegraded',
        'maxLatencyMs',
        'messagesPublished',
        'messagesReceived',
        'publishFailures',
        'uptime',
      ].sort(),
    );
    const cluster = body.cluster as { instances: Array<Record<string, number | string>> };
    expect(cluster.instances[0]).toMatchObject({
      instanceId: app.ctx.config.INSTANCE_ID,
      connectedClients: 0,
    });
    expect(cluster.instances[0]?.startedAt).toBeLessThanOrEqual(Date.now());
    expect(Math.abs(Number(body.timestamp) - Date.now())).toBeLessThan(60_000);
  });

  it('serves Prometheus text with Accept: text/plain or ?format=prometheus', async () => {
    for (const res of [
      await get({ authorization: `Bearer ${KEY}`, accept: 'text/plain' }),
      await get({ cookie: admin.cookie }, '/metrics?format=prometheus'),
    ]) {
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
      const id = app.ctx.config.INSTANCE_ID;
      expect(res.body).toContain('# TYPE herald_pubsub_messages_published_total counter');
      expect(res.body).toMatch(
        new RegExp(`herald_pubsub_messages_published_total\\{instance="${id}"\\} \\d+`),
      );
      expect(res.body).toContain(`herald_pubsub_degraded{instance="${id}"} 0`);
      expect(res.body).toContain(`herald_cluster_active_instances{instance="${id}"} 1`);
      for (const line of res.body.trim().split('\n')) {
        expect(line).toMatch(/^(# (HELP|TYPE) \w+ .+|\w+\{[^}]*\} -?[\d.e+-]+)$/);
      }
    }
  });

  it('rejects an unknown format', async () => {
    const res = await get({ authorization: `Bearer ${KEY}` }, '/metrics?format=xml');
    expect(res.statusCode).toBe(400);
  });

  it('is documented in the OpenAPI document', async () => {
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
      paths: Record<string, { get?: { responses: Record<string, unknown> } }>;
    };
    expect(Object.keys(doc.paths['/metrics']?.get?.responses ?? {})).toEqual(
      expect.arrayContaining(['200', '401', '403']),
    );
  });

  it('lets only admins in when no key is configured', async () => {
    const keyless = await env.app({ METRICS_API_KEY: '' });
    const withKey = await keyless.inject({
      method: 'GET',
      url: '/metrics',
      headers: { authorization: `Bearer ${KEY}` },
    });
    expect(withKey.statusCode).toBe(403);
    const adminRes = await keyless.inject({
      method: 'GET',
      url: '/metrics',
      headers: { cookie: admin.cookie },
    });
    expect(adminRes.statusCode).toBe(200);
    // Two instances of one deployment now see each other.
    const body = adminRes.json() as { cluster: { activeInstances: number } };
    expect(body.cluster.activeInstances).toBe(2);
  });
});

describe('METRICS_API_KEY at start-up', () => {
  it('refuses a key shorter than 32 characters', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      env: { ...process.env, NODE_ENV: 'test', PORT: '0', METRICS_API_KEY: 'short-key' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(1);
    expect(stderr).toContain('METRICS_API_KEY must be at least 32 characters long');
  });
});
