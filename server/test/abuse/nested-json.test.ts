// Issue 22 (5): deeply nested JSON on an /auth POST is a 400 that counts against the route's rate limit, never a
// 500 with an error-level stack trace. So does every other malformed /auth body (broken JSON, NUL, another content
// type): CONTRACT §8.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createAdmin, jsonHeaders } from '../helpers/users.js';

const MAX = 5;
// Within the 64 KiB body limit: arrays (2 bytes a level) and objects (6 bytes a level).
const nested = (depth: number, kind: 'array' | 'object') =>
  kind === 'array'
    ? `{"email":${'['.repeat(depth)}1${']'.repeat(depth)},"password":"x"}`
    : `{"email":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)},"password":"x"}`;

describe('deeply nested JSON on /auth', () => {
  let env: TestEnv;
  let app: App;
  const logged: Array<Record<string, unknown>> = [];
  beforeAll(async () => {
    env = await createTestEnv({
      AUTH_RATE_LIMIT_MAX: String(MAX),
      AUTH_RATE_LIMIT_WINDOW_S: '60',
      LOG_LEVEL: 'warn',
    });
    app = await env.app({}, { logStream: { write: (line: string) => void logged.push(JSON.parse(line)) } });
  });
  afterAll(() => env.close());

  it('answers 400 then 429 from one address, with no 500 and no error-level log', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 200; i++) {
      const res = await app.inject({
        method: 'POST',
        url: '/auth/sign-in/email',
        headers: jsonHeaders(),
        payload: i % 2 === 0 ? nested(30_000, 'array') : nested(10_000, 'object'),
        remoteAddress: '10.9.9.9',
      });
      statuses.push(res.statusCode);
      if (i === 0) {
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json()).toMatchObject({ code: 'INVALID_JSON' });
      }
    }
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(statuses.slice(0, MAX).every((s) => s === 400)).toBe(true);
    expect(statuses.slice(MAX).every((s) => s === 429)).toBe(true);
    expect(logged.filter((l) => Number(l.level) >= 50)).toEqual([]);
  });

  let lastOctet = 0;
  // CONTRACT §8: malformed input on /auth counts against the route's rate limit like any other request, whatever
  // is wrong with it (these used to be answered by the body parser, before better-auth's limiter saw them).
  it.each([
    ['broken JSON', 'application/json', '{"email":', 400, 'INVALID_JSON'],
    [
      'a NUL character',
      'application/json',
      '{"email":"a\\u0000@example.test","password":"x"}',
      400,
      'VALIDATION_ERROR',
    ],
    ['a text/plain body', 'text/plain', 'email=a@example.test', 415, 'UNSUPPORTED_MEDIA_TYPE'],
    [
      'a form body on a JSON route',
      'application/x-www-form-urlencoded',
      'email=a%40example.test',
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
  ] as const)(
    "%s (as %s): refused, then 429 once the route's limit is spent",
    async (_, type, payload, status, code) => {
      // One address per case: each starts with the route's whole allowance.
      const address = `10.9.8.${++lastOctet}`;
      const statuses: number[] = [];
      for (let i = 0; i < MAX + 3; i++) {
        const res = await app.inject({
          method: 'POST',
          url: '/auth/sign-in/email',
          headers: { ...jsonHeaders(), 'content-type': type },
          payload,
          remoteAddress: address,
        });
        statuses.push(res.statusCode);
        if (i === 0) {
          expect(res.statusCode, res.body).toBe(status);
          expect(res.json()).toMatchObject({ code });
        }
        if (res.statusCode === 429) expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      }
      expect(statuses).toEqual([...Array(MAX).fill(status), 429, 429, 429]);
      expect(logged.filter((l) => Number(l.level) >= 50)).toEqual([]);
    },
  );

  it("answers 400 INVALID_JSON on Herald's own routes (a notification's metadata.data) instead of a 500", async () => {
    const admin = await createAdmin(app, env.smtp);
    const deep = `${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}`;
    const res = await app.inject({
      method: 'POST',
      url: '/admin/notifications/send',
      headers: jsonHeaders(admin.cookie),
      payload: `{"target":{"scope":"user","identifier":"${admin.id}"},"notification":{"type":"info","title":"t","content":"c","metadata":{"data":${deep}}}}`,
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ code: 'INVALID_JSON' });
    expect(logged.filter((l) => Number(l.level) >= 50)).toEqual([]);
  });
});
