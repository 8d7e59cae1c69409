// The OpenAPI document covers Herald's own routes (from their Zod schemas) and better-auth's /auth routes.
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { HERALD_LOGO_SVG } from '../../src/http/openapi.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createVerifiedUser, jsonHeaders } from '../helpers/users.js';

interface Operation {
  tags?: string[];
  summary?: string;
  description?: string;
  security?: Array<Record<string, string[]>>;
  responses: Record<string, { description?: string; content?: Record<string, { schema?: unknown }> }>;
}
type Doc = {
  openapi: string;
  tags?: Array<{ name: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes?: Record<string, Record<string, string>>; schemas?: Record<string, unknown> };
};

function operations(doc: Doc): Array<[string, string, Operation]> {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, op]): [string, string, Operation] => [method, path, op]),
  );
}

describe('OpenAPI document', () => {
  let env: TestEnv;
  let app: App;
  let doc: Doc;
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
    const res = await app.inject({ url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    doc = res.json() as Doc;
  });
  afterAll(() => env.close());

  it('is OpenAPI 3.1 and lists every contract route of §1 with its method', () => {
    expect(doc.openapi).toBe('3.1.0');
    const expected: Array<[string, string]> = [
      ['post', '/auth/sign-up/email'],
      ['post', '/auth/sign-in/email'],
      ['post', '/auth/sign-in/username'],
      ['post', '/auth/sign-out'],
      ['get', '/auth/verify-email'],
      ['post', '/auth/verify-email'],
      ['get', '/auth/get-session'],
      ['post', '/auth/forget-password'],
      ['post', '/auth/request-password-reset'],
      ['post', '/auth/reset-password'],
      ['post', '/auth/sign-in/magic-link'],
      ['get', '/auth/magic-link/verify'],
      ['post', '/auth/sign-in/social'],
      ['post', '/auth/admin/ban-user'],
    ];
    for (const [method, path] of expected)
      expect(doc.paths[path]?.[method], `${method} ${path}`).toBeDefined();
    expect(doc.paths['/auth/sign-in/email']?.post?.tags).toEqual(['accounts (better-auth)']);
    // better-auth's own schema endpoint is not part of the public surface.
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/auth/open-api'))).toBe(false);
  });

  it('lists the feature and operations routes next to them', () => {
    for (const path of [
      '/notification/list',
      '/notification/stream',
      '/admin/notifications/send',
      '/chat',
      '/metrics',
    ])
      expect(doc.paths[path], path).toBeDefined();
  });

  it('is a valid OpenAPI 3.1 document (schema validation and every $ref resolved)', async () => {
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    // Throws on a $ref that points nowhere (e.g. #/components/schemas/ChatMessage before it was registered).
    expect(() => validator.resolveRefs()).not.toThrow();
  });

  it('names only security schemes it defines, on exactly the routes that take them', () => {
    const schemes = doc.components.securitySchemes ?? {};
    expect(schemes.session).toMatchObject({
      type: 'apiKey',
      in: 'cookie',
      name: 'better-auth.session_token',
    });
    expect(schemes.metricsKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(schemes.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    for (const [method, path, op] of operations(doc)) {
      for (const requirement of op.security ?? [])
        for (const name of Object.keys(requirement))
          expect(schemes[name], `${method} ${path} names ${name}`).toBeDefined();
    }
    const security = (method: string, path: string) => doc.paths[path]?.[method]?.security;
    // Signed-out clients call these.
    for (const path of [
      '/auth/sign-up/email',
      '/auth/sign-in/email',
      '/auth/sign-in/username',
      '/auth/forget-password',
      '/auth/reset-password',
    ])
      expect(security('post', path), path).toBeUndefined();
    expect(security('get', '/auth/verify-email')).toBeUndefined();
    expect(security('get', '/health')).toBeUndefined();
    expect(security('post', '/auth/sign-out')).toEqual([{ session: [] }]);
    expect(security('post', '/auth/admin/ban-user')).toEqual([{ session: [] }]);
    expect(security('get', '/notification/list')).toEqual([{ session: [] }]);
    expect(security('get', '/chat/history')).toEqual([{ session: [] }]);
    expect(security('get', '/metrics')).toEqual([{ metricsKey: [] }, { apiKey: [] }, { session: [] }]);
    expect(security('post', '/admin/notifications/send')).toEqual([{ session: [] }, { apiKey: [] }]);
    for (const [method, path] of [
      ['post', '/admin/webhooks'],
      ['get', '/admin/webhooks'],
      ['delete', '/admin/webhooks/{id}'],
      ['get', '/admin/webhooks/{id}/deliveries'],
    ] as const)
      expect(security(method, path), `${method} ${path}`).toEqual([{ session: [] }]);
    // The API-key scheme is offered on exactly the two routes that take keys.
    const keyed: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(
        item as Record<string, { security?: Array<Record<string, unknown>> }>,
      )) {
        if (op.security?.some((s) => 'apiKey' in s)) keyed.push(`${method.toUpperCase()} ${path}`);
      }
    }
    expect(keyed.sort()).toEqual([
      'GET /admin/notifications/sends/{id}',
      'GET /metrics',
      'POST /admin/notifications/send',
    ]);
  });

  it('declares the SSE stream as text/event-stream and both media types of /metrics', () => {
    const stream = doc.paths['/notification/stream']?.get?.responses['200'];
    expect(Object.keys(stream?.content ?? {})).toEqual(['text/event-stream']);
    const metrics = doc.paths['/metrics']?.get?.responses['200'];
    expect(Object.keys(metrics?.content ?? {}).sort()).toEqual([
      'application/json',
      'text/plain; version=0.0.4',
    ]);
  });

  it('documents timestamps as date-time', () => {
    const notification = JSON.stringify(doc.paths['/notification/list']?.get?.responses['200']);
    expect(notification).toContain('"createdAt":{"type":"string","format":"date-time"');
    expect(doc.components.schemas?.ChatMessage).toMatchObject({
      properties: { createdAt: { type: 'string', format: 'date-time' } },
    });
  });

  it('is readable: Herald first, a summary per operation, no "Default Response"', () => {
    expect(doc.tags?.map((t) => t.name)).toEqual([
      'notifications',
      'admin',
      'chat',
      'operations',
      'web app',
      'accounts (better-auth)',
    ]);
    const paths = Object.keys(doc.paths);
    const firstAuth = paths.findIndex((p) => p.startsWith('/auth/'));
    expect(paths.slice(firstAuth).every((p) => p.startsWith('/auth/'))).toBe(true);
    expect(paths[0]).toBe('/notification/list');
    for (const [method, path, op] of operations(doc)) {
      expect(op.summary, `${method} ${path} summary`).toEqual(expect.any(String));
      for (const [status, response] of Object.entries(op.responses)) {
        expect(response.description, `${method} ${path} ${status}`).toEqual(expect.any(String));
        expect(response.description, `${method} ${path} ${status}`).not.toBe('Default Response');
      }
    }
  });

  it('omits better-auth routes that are disabled here', async () => {
    expect(doc.paths['/auth/change-email']).toBeUndefined();
    expect(doc.paths['/auth/delete-user']).toBeUndefined();
    // ...because they do not work: changing the email is refused for every caller.
    const user = await createVerifiedUser(app, env.smtp);
    const res = await app.inject({
      method: 'POST',
      url: '/auth/change-email',
      headers: jsonHeaders(user.cookie),
      payload: { newEmail: 'other@example.com' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'CHANGE_EMAIL_DISABLED' });
  });

  it('serves the same document to the reference UI and the UI itself', async () => {
    const json = await app.inject({ url: '/docs/json' });
    expect(Object.keys((json.json() as Doc).paths).sort()).toEqual(Object.keys(doc.paths).sort());
    const ui = await app.inject({ url: '/docs/' });
    expect(ui.statusCode).toBe(200);
    expect(ui.headers['content-type']).toContain('text/html');
    expect(ui.body).toContain('<title>Herald API</title>');
    const init = await app.inject({ url: '/docs/static/swagger-initializer.js' });
    expect(init.statusCode).toBe(200);
    // The Herald wordmark replaces the framework's logo.
    expect(init.body).toContain(`data:image/svg+xml;base64,${HERALD_LOGO_SVG.toString('base64')}`);
  });
});
