// OpenTelemetry tracing end to end: a real server process with the standard OTEL_* variables exports OTLP/HTTP JSON
// to a receiver on loopback; a request carrying a W3C `traceparent` produces spans (HTTP server, Fastify, pg,
// ioredis) in the trace that was sent, the server span a child of the caller's span. Without the variables nothing
// is exported.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { TEST_AUTH_SECRET, TEST_REDIS_URL } from '../helpers/env.js';
import { type ServerProcess, spawnServer } from '../helpers/process.js';
import { freePort } from '../helpers/redis-server.js';

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

describe('tracing off by default', () => {
  it('without OTEL_* variables nothing is exported and no SDK is loaded', async () => {
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
