// OpenTelemetry tracing end to end: a real server process with the standard OTEL_* variables exports OTLP/HTTP JSON
// to a receiver on loopback; a request carrying a W3C `traceparent` produces spans (HTTP server, Fastify, pg,
// ioredis) in the trace that was sent, the server span a child of the caller's span. An SSE stream, a chat send
// and the email, webhook and push queue workers make their spans too. Without the variables nothing is exported.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateVapidKeys } from '../../src/config.js';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { TEST_AUTH_SECRET, TEST_REDIS_URL } from '../helpers/env.js';
import { type ServerProcess, spawnServer } from '../helpers/process.js';
import { startPushService, type TestPushService } from '../helpers/push-service.js';
import { freePort } from '../helpers/redis-server.js';
import { startReceiver as startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { openChat } from '../helpers/ws-client.js';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: Array<{ key: string; value: Record<string, unknown> }>;
}

interface Receiver {
  url: string;
  spans: OtlpSpan[];
  resources: Array<Record<string, unknown>>;
  contentTypes: string[];
  close(): Promise<void>;
}

/** A minimal OTLP/HTTP receiver: POST /v1/traces with a JSON ExportTraceServiceRequest. */
async function startReceiver(): Promise<Receiver> {
  const spans: OtlpSpan[] = [];
  const resources: Array<Record<string, unknown>> = [];
  const contentTypes: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      body += c;
    });
    req.on('end', () => {
      contentTypes.push(String(req.headers['content-type']));
      if (req.method === 'POST' && req.url === '/v1/traces') {
        const parsed = JSON.parse(body) as {
          resourceSpans?: Array<{
            resource?: Record<string, unknown>;
            scopeSpans?: Array<{ spans?: OtlpSpan[] }>;
          }>;
        };
        for (const rs of parsed.resourceSpans ?? []) {
          resources.push(rs.resource ?? {});
          for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []));
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    resources,
    contentTypes,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const attr = (span: OtlpSpan, key: string) => {
  const v = span.attributes?.find((a) => a.key === key)?.value;
  return v ? Object.values(v)[0] : undefined;
};

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function env(port: number, db: TestDatabase, extra: Record<string, string>): Record<string, string> {
  return {
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'info',
    AUTH_SECRET: TEST_AUTH_SECRET,
    DATABASE_URL: db.url,
    CACHE_URL: TEST_REDIS_URL,
    CACHE_KEY_PREFIX: `t:otel:${port}:`,
    // Every /health runs its database and store checks (no cached result), so the request makes pg and redis calls.
    HEALTH_CACHE_MS: '0',
    OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
    SHUTDOWN_TIMEOUT_MS: '5000',
    ...extra,
  };
}

describe('OpenTelemetry tracing', () => {
  let db: TestDatabase;
  let receiver: Receiver;
  let server: ServerProcess;
  let port: number;

  beforeAll(async () => {
    [db, receiver, port] = await Promise.all([createTestDatabase(), startReceiver(), freePort()]);
    server = spawnServer(
      env(port, db, {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'herald-otel-test',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test',
        OTEL_BSP_SCHEDULE_DELAY: '100',
      }),
    );
    await server.waitForLine(/Herald ready/);
  });
  afterAll(async () => {
    if (server.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await server.exited;
    }
    await receiver.close();
    await db.drop();
  });

  it('continues an incoming traceparent: HTTP, Fastify, pg and ioredis spans arrive in the sent trace', async () => {
    expect(server.stdout.some((l) => l.includes('tracing on: http/json to'))).toBe(true);
    const traceId = randomBytes(16).toString('hex');
    const parentSpanId = randomBytes(8).toString('hex');
    const res = await fetch(`http://127.0.0.1:${port}/health`, {
      headers: { traceparent: `00-${traceId}-${parentSpanId}-01`, 'x-request-id': 'otel-test-1' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe('otel-test-1');

    const ofTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
    const serverSpan = await until('the HTTP server span', () =>
      ofTrace().find((s) => s.kind === 2 && s.parentSpanId === parentSpanId),
    );
    expect(attr(serverSpan, 'http.request.method') ?? attr(serverSpan, 'http.method')).toBe('GET');
    const pgSpan = await until('a pg span', () =>
      ofTrace().find(
        (s) => attr(s, 'db.system') === 'postgresql' || attr(s, 'db.system.name') === 'postgresql',
      ),
    );
    const redisSpan = await until('an ioredis span', () =>
      ofTrace().find((s) => attr(s, 'db.system') === 'redis' || attr(s, 'db.system.name') === 'redis'),
    );
    const fastifySpan = await until('a Fastify span', () =>
      ofTrace().find((s) => attr(s, 'fastify.root') === '@fastify/otel'),
    );
    // All in the one trace, under the server span.
    const ids = new Set(ofTrace().map((s) => s.spanId));
    for (const span of [pgSpan, redisSpan, fastifySpan]) {
      expect(span.parentSpanId && ids.has(span.parentSpanId)).toBe(true);
    }
    expect(receiver.contentTypes.every((t) => t.startsWith('application/json'))).toBe(true);
    const resource = JSON.stringify(receiver.resources);
    expect(resource).toContain('herald-otel-test');
    expect(resource).toContain('deployment.environment');
  });

  it('queue workers make spans: one email-outbox.send span per email, the round’s settle query under its own span', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/auth/sign-up/email`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: `http://localhost:${port}` },
      body: JSON.stringify({
        email: `otel-${randomBytes(4).toString('hex')}@example.com`,
        password: 'correct-horse-battery-staple',
        name: 'Otel',
      }),
    });
    expect(res.status).toBe(200);
    const send = await until('an email-outbox.send span', () =>
      receiver.spans.find((s) => s.name === 'email-outbox.send'),
    );
    expect(send.kind).toBe(5); // CONSUMER
    // Sent rows are settled per round in one statement (email-outbox.settle), not one query per email.
    const settle = await until('an email-outbox.settle span', () =>
      receiver.spans.find((s) => s.name === 'email-outbox.settle'),
    );
    const children = await until('its query', () => {
      const found = receiver.spans.filter(
        (s) =>
          s.parentSpanId === settle.spanId &&
          (attr(s, 'db.system') === 'postgresql' || attr(s, 'db.system.name') === 'postgresql'),
      );
      return found.length > 0 ? found : undefined;
    });
    expect(children.every((c) => c.traceId === settle.traceId)).toBe(true);
  });

  it('a request without traceparent starts its own trace; idle background polls export nothing', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/health`);
    expect(res.status).toBe(200);
    const before = receiver.spans.length;
    await until('the new trace', () => (receiver.spans.length > before ? true : undefined));
    // Background workers (email outbox, webhooks) poll every second or two without a parent span: none of their
    // queries may be exported on their own.
    const orphans = receiver.spans.filter(
      (s) =>
        !s.parentSpanId &&
        (attr(s, 'db.system') === 'postgresql' || attr(s, 'db.system.name') === 'postgresql'),
    );
    expect(orphans).toEqual([]);
  });
});

describe('spans of SSE, chat and the webhook and push workers', () => {
  const vapid = generateVapidKeys();
  let cluster: TestCluster;
  let receiver: Receiver;
  let push: TestPushService;
  let hooks: WebhookReceiver;

  beforeAll(async () => {
    [receiver, push, hooks] = await Promise.all([
      startReceiver(),
      startPushService({ vapidPublicKey: vapid.publicKey }),
      startWebhookReceiver(),
    ]);
    cluster = await startCluster({
      instances: 1,
      redis: 'shared',
      env: {
        ADMIN_EMAILS: 'otel-admin@example.test',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '100',
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        VAPID_SUBJECT: 'mailto:ops@example.com',
        PUSH_ALLOW_PRIVATE_ENDPOINTS: 'true',
        WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
        PUSH_QUEUE_POLL_MS: '100',
        WEBHOOK_QUEUE_POLL_MS: '100',
      },
    });
  });
  afterAll(async () => {
    await cluster?.close();
    await Promise.all([receiver?.close(), push?.close(), hooks?.close()]);
  });

  // Longer than `until`'s own bound, so a missing span fails with its name rather than a bare timeout.
  it('an SSE stream is one HTTP span of the sent trace; a chat send, a webhook delivery and a push send each make theirs', {
    timeout: 180_000,
  }, async () => {
    const base = cluster.url(0);
    const admin = await createVerifiedUserOn(cluster, 0, { email: 'otel-admin@example.test' });
    const user = await createVerifiedUserOn(cluster, 0);
    const headers = (cookie: string) => ({
      'content-type': 'application/json',
      origin: CLUSTER_ORIGIN,
      cookie,
    });

    // SSE: the stream's server span continues the sent trace and ends when the client goes.
    const traceId = randomBytes(16).toString('hex');
    const parentSpanId = randomBytes(8).toString('hex');
    await new Promise<void>((resolve, reject) => {
      const req = http.get(
        `${base}/notification/stream`,
        {
          headers: {
            accept: 'text/event-stream',
            cookie: user.cookie,
            traceparent: `00-${traceId}-${parentSpanId}-01`,
          },
          agent: false,
        },
        (res) => {
          expect(res.statusCode).toBe(200);
          res.once('data', () => {
            req.destroy();
            resolve();
          });
        },
      );
      req.on('error', (err) => {
        if ((err as NodeJS.ErrnoException).code !== 'ECONNRESET') reject(err);
      });
    });
    const stream = await until('the SSE stream span', () =>
      receiver.spans.find((s) => s.traceId === traceId && s.kind === 2 && s.parentSpanId === parentSpanId),
    );
    expect(JSON.stringify(stream.attributes)).toContain('/notification/stream');

    // Chat: one span per send_message, with the database calls that stored it under it.
    const chat = await openChat(`${base.replace('http', 'ws')}/chat`, {
      cookie: user.cookie,
      origin: CLUSTER_ORIGIN,
    });
    chat.send({ type: 'send_message', message: 'traced message', clientMessageId: 'otel-1' });
    await chat.next('new_message');
    await chat.close();
    const chatSpan = await until('a chat.send_message span', () =>
      receiver.spans.find((s) => s.name === 'chat.send_message'),
    );
    await until('a query under the chat span', () =>
      receiver.spans.find(
        (s) =>
          s.parentSpanId === chatSpan.spanId &&
          (attr(s, 'db.system') === 'postgresql' || attr(s, 'db.system.name') === 'postgresql'),
      ),
    );

    // A webhook and a push for one notification to a user who is offline (no stream): `message` is not among the
    // default email types, so push delivers it.
    const hook = await fetch(`${base}/admin/webhooks`, {
      method: 'POST',
      headers: headers(admin.cookie),
      body: JSON.stringify({ url: hooks.url(), events: ['notification.created'] }),
    });
    expect(hook.status).toBe(201);
    const prefs = await fetch(`${base}/notification/preferences`, {
      method: 'PATCH',
      headers: headers(user.cookie),
      body: JSON.stringify({ pushEnabled: true }),
    });
    expect(prefs.status).toBe(200);
    const browser = push.browser();
    const sub = await fetch(`${base}/notification/push/subscriptions`, {
      method: 'POST',
      headers: headers(user.cookie),
      body: JSON.stringify(browser.subscription),
    });
    expect(sub.status).toBe(201);
    const sent = await fetch(`${base}/admin/notifications/send`, {
      method: 'POST',
      headers: headers(admin.cookie),
      body: JSON.stringify({
        target: { scope: 'user', identifier: user.id },
        notification: { type: 'message', title: 'traced', content: 'x' },
      }),
    });
    expect(sent.status).toBe(200);
    await push.until(() => push.accepted.some((m) => m.token === browser.token), 30_000);

    for (const name of ['webhook.deliver', 'push.send']) {
      const span = await until(`a ${name} span`, () => receiver.spans.find((s) => s.name === name));
      expect(span.kind, name).toBe(5); // CONSUMER
      // The request to the receiver (an HTTP client span) is its child, in its trace.
      const request = await until(`the outgoing request under ${name}`, () =>
        receiver.spans.find((s) => s.parentSpanId === span.spanId && s.kind === 3),
      );
      expect(request.traceId).toBe(span.traceId);
    }
    const pushSpan = receiver.spans.find((s) => s.name === 'push.send');
    expect(pushSpan && attr(pushSpan, 'herald.push.service')).toBe(push.origin);
    expect(push.errors).toEqual([]);
  });
});

describe('tracing off by default', () => {
  // A bound against a hang (the server process starts inside the test), as long as the hooks': a loaded machine can
  // take over a minute to start one.
  it('without OTEL_* variables nothing is exported and no SDK is loaded', { timeout: 120_000 }, async () => {
    const [db, receiver, port] = await Promise.all([createTestDatabase(), startReceiver(), freePort()]);
    // An endpoint pointing at the receiver, but OTEL_SDK_DISABLED wins; a second run with no variable at all is
    // the same code path (Config.tracing null), so one process covers both.
    const server = spawnServer(
      env(port, db, { OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }),
    );
    try {
      await server.waitForLine(/Herald ready/);
      const res = await fetch(`http://127.0.0.1:${port}/health`, {
        headers: {
          traceparent: `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`,
        },
      });
      expect(res.status).toBe(200);
      server.child.kill('SIGTERM');
      expect((await server.exited).code).toBe(0);
      expect(receiver.spans).toEqual([]);
      expect(server.stdout.some((l) => l.includes('tracing on'))).toBe(false);
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
      await receiver.close();
      await db.drop();
    }
  });
});
