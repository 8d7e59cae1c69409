// The OpenAPI document covers Herald's own routes (from their Zod schemas) and better-auth's /auth routes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';

type Doc = { openapi: string; paths: Record<string, Record<string, { tags?: string[] }>> };

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

  it('serves the same document to the reference UI and the UI itself', async () => {
    const json = await app.inject({ url: '/docs/json' });
    expect(Object.keys((json.json() as Doc).paths).sort()).toEqual(Object.keys(doc.paths).sort());
    const ui = await app.inject({ url: '/docs/' });
    expect(ui.statusCode).toBe(200);
    expect(ui.headers['content-type']).toContain('text/html');
  });
});
