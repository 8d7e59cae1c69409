// GET /metrics: access matrix (401/403/200 for key and sessions), the contract's JSON shape with real counters,
// the Prometheus text format, the OpenAPI entry, and a short key refused at start-up.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, TEST_ORIGIN, type TestEnv } from '../helpers/app.js';
import { createAdmin, createVerifiedUser, type TestUser } from '../helpers/users.js';
import { openChat } from '../helpers/ws-client.js';

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
      [
        'bus',
        'chat',
        'cluster',
        'database',
        'distributedMode',
        'email',
        'instanceId',
        'pubsub',
        'push',
        'timestamp',
        'webhooks',
      ].sort(),
    );
    // PostgreSQL pools and replica reads (issue 28): one primary pool in use, no replicas configured.
    const database = body.database as {
      pools: Array<{ pool: string; total: number }>;
      reads: Record<string, number>;
      replicas: unknown[];
    };
    expect(database.pools.map((p) => p.pool)).toEqual(['primary']);
    expect(database.pools[0]?.total).toBeGreaterThan(0);
    expect(database.reads).toMatchObject({ replica: 0, fallbacks: 0 });
    expect(database.replicas).toEqual([]);

    // Push is on (a development key pair) and nothing was queued.
    expect(body.push).toMatchObject({ pending: 0, sent: 0, attemptFailures: 0 });
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
      const { types, samples } = parsePrometheus(res.body);
      expect(types.get('herald_pubsub_messages_published_total')).toBe('counter');
      expect(sample(samples, 'herald_pubsub_messages_published_total')?.labels).toEqual({ instance_id: id });
      expect(sample(samples, 'herald_pubsub_degraded')?.value).toBe(0);
      expect(sample(samples, 'herald_cluster_active_instances')?.value).toBe(1);
      expect(sample(samples, 'herald_cluster_instance_chat_sockets', { member: id })).toBeDefined();
    }
  });

  it('follows Prometheus conventions: prefix, base units, _total counters, histograms, no instance/job label', async () => {
    const { types, samples } = parsePrometheus(
      (await get({ authorization: `Bearer ${KEY}` }, '/metrics?format=prometheus')).body,
    );
    for (const [name, type] of types) {
      expect(name, name).toMatch(/^herald_[a-z0-9_]+$/);
      // Base units only: no milliseconds, kilobytes, …
      expect(name, name).not.toMatch(/_(ms|milliseconds|minutes|hours|kb|kilobytes|mb|megabytes)(_|$)/);
      if (type === 'counter') expect(name, name).toMatch(/_total$/);
      else expect(name, name).not.toMatch(/_total$/);
    }
    for (const s of samples) {
      expect(s.labels, s.name).not.toHaveProperty('instance');
      expect(s.labels, s.name).not.toHaveProperty('job');
    }
    // Latency histograms, in seconds.
    for (const name of [
      'herald_http_request_duration_seconds',
      'herald_pubsub_latency_seconds',
      'herald_sse_fanout_duration_seconds',
      'herald_chat_fanout_duration_seconds',
      'herald_chat_send_stage_seconds',
    ])
      expect(types.get(name), name).toBe('histogram');
    // Connections, email queue and process/runtime figures.
    for (const name of [
      'herald_sse_open_streams',
      'herald_chat_open_sockets',
      'herald_email_queue_pending',
      'herald_email_queue_failed',
      'herald_email_send_failures_total',
      'herald_nodejs_eventloop_lag_seconds',
      'herald_nodejs_heap_size_used_bytes',
      'herald_process_resident_memory_bytes',
    ])
      expect(types.has(name), name).toBe(true);
    expect(types.get('herald_nodejs_gc_duration_seconds')).toBe('histogram');
  });

  it('counts HTTP requests by route template, and SSE streams and fan-out', async () => {
    const scrape = async () =>
      parsePrometheus((await get({ authorization: `Bearer ${KEY}` }, '/metrics?format=prometheus')).body)
        .samples;
    const route = { route: '/notification/unread-count', method: 'GET', status_class: '2xx' };
    const countOf = (samples: Sample[]) =>
      sample(samples, 'herald_http_request_duration_seconds_count', route)?.value ?? 0;
    const before = await scrape();
    for (let i = 0; i < 3; i++) {
      const res = await app.inject({
        method: 'GET',
        url: '/notification/unread-count',
        headers: { cookie: user.cookie },
      });
      expect(res.statusCode).toBe(200);
    }
    const after = await scrape();
    expect(countOf(after) - countOf(before)).toBe(3);
    // Buckets are cumulative and end in +Inf equal to the count.
    const inf = sample(after, 'herald_http_request_duration_seconds_bucket', { ...route, le: '+Inf' });
    expect(inf?.value).toBe(countOf(after));
    expect(
      after.filter(
        (s) => s.name === 'herald_http_request_duration_seconds_bucket' && s.labels.route === route.route,
      ).length,
    ).toBeGreaterThan(5);
    // A 401 is its own status class.
    await app.inject({ method: 'GET', url: '/notification/unread-count' });
    expect(
      sample(await scrape(), 'herald_http_request_duration_seconds_count', { ...route, status_class: '4xx' })
        ?.value,
    ).toBeGreaterThanOrEqual(1);
    // An admin send fans out to the recipient's open stream on this instance.
    const fanouts = (samples: Sample[]) =>
      sample(samples, 'herald_sse_fanout_duration_seconds_count')?.value ?? 0;
    const fanoutBefore = fanouts(after);
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const controller = new AbortController();
    const stream = await fetch(`${address}/notification/stream`, {
      headers: { cookie: user.cookie },
      signal: controller.signal,
    });
    expect(stream.status).toBe(200);
    const reader = stream.body?.getReader();
    await reader?.read(); // `connected`
    expect(sample(await scrape(), 'herald_sse_open_streams')?.value).toBe(1);
    const send = await app.inject({
      method: 'POST',
      url: '/admin/notifications/send',
      headers: { cookie: admin.cookie, 'content-type': 'application/json', origin: TEST_ORIGIN },
      payload: {
        target: { scope: 'users', identifiers: [user.email] },
        notification: { type: 'info', title: 'Hi', content: 'Fan-out' },
      },
    });
    expect(send.statusCode).toBe(200);
    await reader?.read(); // the new notification
    expect(fanouts(await scrape())).toBeGreaterThan(fanoutBefore);
    controller.abort();
  });

  it('times the stages of a chat send (queued, checks, store) once per stored message, and its fan-out writes', async () => {
    const scrape = async () =>
      parsePrometheus((await get({ authorization: `Bearer ${KEY}` }, '/metrics?format=prometheus')).body)
        .samples;
    const stages = ['queued', 'checks', 'store'] as const;
    const counts = (samples: Sample[]) =>
      stages.map((stage) => sample(samples, 'herald_chat_send_stage_seconds_count', { stage })?.value ?? 0);
    const flushes = (samples: Sample[]) =>
      sample(samples, 'herald_chat_fanout_duration_seconds_count')?.value ?? 0;
    if (!app.server.listening) await app.listen({ port: 0, host: '127.0.0.1' });
    const chat = await openChat(app, { cookie: user.cookie });
    try {
      const before = await scrape();
      chat.send({ type: 'send_message', message: 'timed', clientMessageId: 'stage-1' });
      await chat.next('new_message', (e) => e.message?.message === 'timed');
      const after = await scrape();
      expect(counts(after).map((n, i) => n - (counts(before)[i] ?? 0))).toEqual([1, 1, 1]);
      // The frame reached the socket through a flush of the fan-out writes, which is timed (a presence frame may
      // add one).
      expect(flushes(after) - flushes(before)).toBeGreaterThanOrEqual(1);
      const sum = sample(await scrape(), 'herald_chat_send_stage_seconds_sum', { stage: 'store' })?.value;
      expect(sum).toBeGreaterThan(0);
    } finally {
      await chat.close();
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

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A strict reader of the text exposition format 0.0.4: every line must be HELP, TYPE or a sample. */
function parsePrometheus(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.trim().split('\n')) {
    const type = /^# TYPE (\w+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type?.[1] && type[2]) {
      types.set(type[1], type[2]);
      continue;
    }
    // prom-client separates metric families with an empty line.
    if (line === '' || /^# HELP \w+ .*$/.test(line)) continue;
    // Values are Go floats: NaN in any case (prom-client writes `Nan`), ±Inf.
    const m = /^(\w+)(?:\{(.*)\})? (-?[\d.e+-]+|[Nn][Aa][Nn]|[+-]Inf)$/.exec(line);
    expect(m, line).not.toBeNull();
    if (!m?.[1] || m[3] === undefined) continue;
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) if (k) labels[k] = v ?? '';
    samples.push({ name: m[1], labels, value: Number(m[3].replace('Inf', 'Infinity')) });
  }
  return { types, samples };
}

function sample(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample | undefined {
  return samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}
