// Request ids: a safe incoming X-Request-Id is kept, echoed on the response and carried by every log line of the
// request; anything else gets a fresh UUID (also echoed).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { safeRequestId } from '../../src/http/request-id.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('safeRequestId', () => {
  it('keeps ids made of safe characters, up to 128 of them', () => {
    for (const id of [
      'abc-123',
      '01HZX3J8K9QW7E5R4T3Y2U1I0P',
      'Root=1-67891233-abcdef012345678912345678',
      'a'.repeat(128),
      'b64/url+id==',
    ]) {
      expect(safeRequestId(id)).toBe(id);
    }
  });

  it('refuses empty, oversized, several, and ids with spaces, quotes, control bytes or non-ASCII', () => {
    for (const id of [
      '',
      'a'.repeat(129),
      'a b',
      'a"b',
      "a'b",
      'a\r\nb',
      'a\u0000b',
      'é',
      'a,b',
      '<script>',
    ]) {
      expect(safeRequestId(id)).toBeUndefined();
    }
    expect(safeRequestId(['a', 'b'])).toBeUndefined();
    expect(safeRequestId(undefined)).toBeUndefined();
  });
});

describe('request ids over HTTP', () => {
  let env: TestEnv;
  let app: App;
  const lines: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    env = await createTestEnv();
    // development: the access log (one "request completed" line) is on, NODE_ENV=test turns it off.
    app = await env.app(
      { NODE_ENV: 'development', LOG_LEVEL: 'info' },
      {
        logStream: {
          write(chunk: string) {
            for (const line of chunk.split('\n').filter(Boolean)) lines.push(JSON.parse(line));
          },
        },
      },
    );
  });
  afterAll(() => env.close());

  it('keeps a safe incoming id: echoed, and on every log line of the request', async () => {
    const res = await app.inject({
      method: 'GET',
      url: '/no-such-route',
      headers: { 'x-request-id': 'abc-123' },
    });
    expect(res.statusCode).toBe(404);
    expect(res.headers['x-request-id']).toBe('abc-123');
    const ofRequest = lines.filter((l) => l.reqId === 'abc-123');
    // One access line per request (CONTRACT §8: a request, malformed or not, costs one line), with what
    // Fastify's two lines carried.
    expect(ofRequest.map((l) => l.msg)).toEqual(['request completed']);
    expect(ofRequest[0]).toMatchObject({
      req: { method: 'GET', url: '/no-such-route' },
      res: { statusCode: 404 },
      responseTime: expect.any(Number),
    });
    // No line about this request carries another id.
    const urlLines = lines.filter((l) => JSON.stringify(l).includes('/no-such-route'));
    expect(urlLines.length).toBeGreaterThan(0);
    for (const l of urlLines) expect(l.reqId).toBe('abc-123');
  });

  it('a malformed request costs one log line (issue 22 #6, CONTRACT §8)', async () => {
    const cases: Array<{ url: string; payload: string; type: string }> = [
      { url: '/notification/mark-all-read', payload: '{broken', type: 'application/json' },
      {
        url: '/notification/mark-all-read',
        payload: `${'['.repeat(5_000)}${']'.repeat(5_000)}`,
        type: 'application/json',
      },
      { url: '/auth/sign-in/email', payload: '{broken', type: 'application/json' },
      { url: '/auth/sign-in/email', payload: 'a=b', type: 'text/plain' },
    ];
    for (const [i, c] of cases.entries()) {
      const id = `malformed-${i}`;
      const res = await app.inject({
        method: 'POST',
        url: c.url,
        headers: { 'content-type': c.type, 'x-request-id': id },
        payload: c.payload,
      });
      expect(res.statusCode, c.payload.slice(0, 20)).toBeGreaterThanOrEqual(400);
      expect(res.statusCode).toBeLessThan(500);
      expect(lines.filter((l) => l.reqId === id).map((l) => l.msg)).toEqual(['request completed']);
    }
  });

  it('replaces an unsafe id with a UUID, echoed and logged', async () => {
    for (const bad of ['a b', 'x'.repeat(129), '"quoted"']) {
      const res = await app.inject({ method: 'GET', url: '/health', headers: { 'x-request-id': bad } });
      const id = res.headers['x-request-id'];
      expect(id).toMatch(UUID);
      expect(lines.some((l) => l.reqId === bad)).toBe(false);
    }
  });

  it('generates a fresh UUID per request when none is sent, also on refused requests', async () => {
    const a = await app.inject({ method: 'GET', url: '/health' });
    const b = await app.inject({ method: 'POST', url: '/notification/list', payload: '{' });
    expect(a.headers['x-request-id']).toMatch(UUID);
    expect(b.headers['x-request-id']).toMatch(UUID);
    expect(a.headers['x-request-id']).not.toBe(b.headers['x-request-id']);
    expect(b.statusCode).toBeGreaterThanOrEqual(400);
    const ofB = lines.filter((l) => l.reqId === b.headers['x-request-id']);
    expect(ofB.length).toBeGreaterThan(0);
  });
});
