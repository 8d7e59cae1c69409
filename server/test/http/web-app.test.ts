// Serving the bundled web app: static files with their cache policy, the SPA fallback for HTML navigations
// only (API paths keep their JSON 404s), the "not built" page, SERVE_WEB_APP=false and the public client config.
// A small stand-in build in a temporary folder keeps this independent of whether web/dist exists.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';

const HTML = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' };

describe('web app serving', () => {
  let env: TestEnv;
  let app: App;
  let dist: string;
  const script = `console.log(${JSON.stringify('x'.repeat(4000))});\n`;
  beforeAll(async () => {
    dist = mkdtempSync(path.join(tmpdir(), 'herald-web-'));
    mkdirSync(path.join(dist, 'assets'));
    writeFileSync(path.join(dist, 'index.html'), '<!doctype html><title>Herald</title><div id="root"></div>');
    writeFileSync(path.join(dist, 'assets', 'index-abc123.js'), script);
    writeFileSync(path.join(dist, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
    env = await createTestEnv();
    app = await env.app({ WEB_APP_DIR: dist });
  });
  afterAll(async () => {
    await env.close();
    rmSync(dist, { recursive: true, force: true });
  });

  it('serves index.html at / with no-cache and a content security policy', async () => {
    const res = await app.inject({ method: 'GET', url: '/', headers: HTML });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.headers['content-security-policy']).toContain("script-src 'self'");
    expect(res.body).toContain('<div id="root">');
    const again = await app.inject({
      method: 'GET',
      url: '/',
      headers: { ...HTML, 'if-none-match': String(res.headers.etag) },
    });
    expect(again.statusCode).toBe(304);
  });

  it('serves hashed assets with a long cache, gzipped when accepted', async () => {
    const res = await app.inject({
      method: 'GET',
      url: '/assets/index-abc123.js',
      headers: { 'accept-encoding': 'gzip, br' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(res.headers['content-type']).toMatch(/^text\/javascript/);
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(res.rawPayload).toString()).toBe(script);
    const plain = await app.inject({ method: 'GET', url: '/assets/index-abc123.js' });
    expect(plain.body).toBe(script);
    const other = await app.inject({ method: 'GET', url: '/favicon.svg' });
    expect(other.headers['cache-control']).toBe('no-cache');
  });

  it('answers HTML navigations to app pages with index.html, /chat and /admin pages included', async () => {
    for (const url of [
      '/notifications',
      '/sign-in?next=%2Fchat',
      '/chat',
      '/admin',
      '/admin/users',
      '/admin/api-keys',
      '/admin/webhooks',
      '/x/y',
    ]) {
      const res = await app.inject({ method: 'GET', url, headers: HTML });
      expect(res.statusCode, url).toBe(200);
      expect(res.body, url).toContain('<div id="root">');
    }
  });

  it('keeps API paths and non-HTML requests on the API (JSON 404s, the chat route, real routes)', async () => {
    for (const url of ['/notification/nope', '/auth/nope', '/docs/nope', '/health/x', '/metrics/x']) {
      const res = await app.inject({ method: 'GET', url, headers: HTML });
      expect(res.statusCode, url).toBe(404);
      expect(res.headers['content-type'], url).toMatch(/^application\/json/);
    }
    const json = await app.inject({ method: 'GET', url: '/notifications' });
    expect(json.statusCode).toBe(404);
    expect(json.json()).toMatchObject({ code: 'NOT_FOUND' });
    const chat = await app.inject({ method: 'GET', url: '/chat' });
    expect(chat.statusCode).toBe(426);
    // The admin pages share their paths with the API's lists: a JSON request stays the API's (401 signed out).
    for (const url of ['/admin/api-keys', '/admin/webhooks']) {
      const api = await app.inject({ method: 'GET', url, headers: { accept: 'application/json' } });
      expect(api.statusCode, url).toBe(401);
      expect(api.json(), url).toMatchObject({ code: 'UNAUTHORIZED' });
    }
    const health = await app.inject({ method: 'GET', url: '/health', headers: HTML });
    expect(health.headers['content-type']).toMatch(/^application\/json/);
    const post = await app.inject({ method: 'POST', url: '/notifications', headers: HTML });
    expect(post.statusCode).toBe(404);
  });

  it('reports which social provider the sign-in page may offer', async () => {
    const res = await app.inject({ method: 'GET', url: '/client-config' });
    expect(res.json()).toMatchObject({ socialProvider: null });
    const withSocial = await env.app({
      WEB_APP_DIR: dist,
      SOCIAL_PROVIDER: 'github',
      SOCIAL_CLIENT_ID: 'id',
      SOCIAL_CLIENT_SECRET: 'secret',
    });
    expect((await withSocial.inject({ method: 'GET', url: '/client-config' })).json()).toMatchObject({
      socialProvider: { id: 'github', signInPath: '/auth/sign-in/social' },
    });
  });

  it("reports where account emails go and whether the page's origin is trusted", async () => {
    const config = app.ctx.config;
    const own = new URL(config.API_BASE_URL);
    const get = (headers: Record<string, string>) =>
      app.inject({ method: 'GET', url: '/client-config', headers }).then((r) => r.json());
    // A same-origin page sends no Origin: the address it was served at counts.
    expect(await get({ host: own.host })).toMatchObject({
      emailDelivery: config.SMTP_HOST ? 'smtp' : 'log',
      origin: { value: own.origin, trusted: true, setting: 'CORS_ALLOWLISTED_ORIGINS' },
    });
    expect((await get({ origin: 'http://refused.example' })).origin).toEqual({
      value: 'http://refused.example',
      trusted: false,
      setting: 'CORS_ALLOWLISTED_ORIGINS',
    });
    expect((await get({ origin: 'javascript:alert(1)' })).origin.trusted).toBe(false);
  });

  it('explains how to build when the build is missing, and the API keeps working', async () => {
    const missing = await env.app({ WEB_APP_DIR: path.join(dist, 'does-not-exist') });
    const res = await missing.inject({ method: 'GET', url: '/', headers: HTML });
    expect(res.statusCode).toBe(503);
    expect(res.body).toContain('npm run build:web');
    expect((await missing.inject({ method: 'GET', url: '/health' })).statusCode).toBe(200);
  });

  it('serves nothing with SERVE_WEB_APP=false', async () => {
    const off = await env.app({ WEB_APP_DIR: dist, SERVE_WEB_APP: 'false' });
    const res = await off.inject({ method: 'GET', url: '/', headers: HTML });
    expect(res.statusCode).toBe(404);
    expect((await off.inject({ method: 'GET', url: '/assets/index-abc123.js' })).statusCode).toBe(404);
  });
});
