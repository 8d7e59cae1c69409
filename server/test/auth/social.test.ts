// Social sign-in end to end against a real OpenID Connect provider (oidc-provider) on a free port: the app
// listens for real, a fetch-based browser follows every redirect by hand carrying cookies per host.

import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { eq } from 'drizzle-orm';
import Provider from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { account as accountTable } from '../../src/infra/schema/index.js';
import { createTestEnv, TEST_ORIGIN, type TestEnv } from '../helpers/app.js';
import { createVerifiedUser } from '../helpers/users.js';

const CLIENT_ID = 'herald-test';
const CLIENT_SECRET = 'herald-test-secret-0123456789abcdef';
const VICTIM_EMAIL = 'victim.local@example.test';

async function freePort(): Promise<number> {
  const s = createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const { port } = s.address() as AddressInfo;
  s.close();
  return port;
}

/** Minimal browser: one cookie jar per origin, manual redirects. */
class Browser {
  private jars = new Map<string, Map<string, string>>();
  async request(url: string, init: RequestInit = {}): Promise<Response> {
    const u = new URL(url);
    const jar = this.jars.get(u.host) ?? new Map<string, string>();
    this.jars.set(u.host, jar);
    const headers = new Headers(init.headers);
    if (jar.size > 0) headers.set('cookie', [...jar].map(([k, v]) => `${k}=${v}`).join('; '));
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair = ''] = c.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (!value || /max-age=0|expires=thu, 01 jan 1970/i.test(c)) jar.delete(name);
      else jar.set(name, value);
    }
    return res;
  }
  /** Follows redirects until a non-redirect response or a URL matching `stopAt`. */
  async follow(url: string, stopAt?: (u: URL) => boolean): Promise<{ res: Response; url: string }> {
    let current = url;
    for (let i = 0; i < 20; i++) {
      if (stopAt?.(new URL(current))) return { res: new Response(null), url: current };
      const res = await this.request(current);
      const location = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && location) {
        current = new URL(location, current).toString();
        continue;
      }
      return { res, url: current };
    }
    throw new Error('too many redirects');
  }
  cookieHeader(host: string): string {
    return [...(this.jars.get(host) ?? [])].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

describe('social sign-in with a generic OIDC provider', () => {
  let env: TestEnv;
  let app: App;
  let oidcServer: Server;
  let apiBase: string;
  let issuer: string;
  const accounts = new Map([
    ['alice', { email: 'alice.oidc@example.test', email_verified: true, name: 'Alice OIDC' }],
    ['mallory', { email: 'mallory.oidc@example.test', email_verified: false, name: 'Mallory' }],
    // Claims the address of an existing verified local account without the provider having verified it.
    ['eve', { email: VICTIM_EMAIL, email_verified: false, name: 'Eve' }],
  ]);

  /** Runs the whole provider round trip for `login`; stops at the first redirect to the front end. */
  async function socialSignIn(browser: Browser, login: string): Promise<string> {
    const start = await browser.request(`${apiBase}/auth/sign-in/social`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: TEST_ORIGIN },
      body: JSON.stringify({
        provider: 'oidc',
        callbackURL: `${TEST_ORIGIN}/after-login`,
        errorCallbackURL: `${TEST_ORIGIN}/login-error`,
      }),
    });
    expect(start.status).toBe(200);
    const { url } = (await start.json()) as { url: string };
    const form = async (at: string, fields: Record<string, string>) => {
      const step = await browser.follow(at);
      const html = await step.res.text();
      const action = html.match(/action="([^"]+)"/)?.[1];
      expect(action, html.slice(0, 300)).toBeDefined();
      const submit = await browser.request(new URL(action ?? '', issuer).toString(), {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(fields).toString(),
      });
      return new URL(submit.headers.get('location') ?? '', issuer).toString();
    };
    const afterLogin = await form(url, { prompt: 'login', login, password: 'anything' });
    const afterConsent = await form(afterLogin, { prompt: 'consent' });
    const end = await browser.follow(afterConsent, (u) => u.toString().startsWith(TEST_ORIGIN));
    return end.url;
  }

  beforeAll(async () => {
    const [oidcPort, apiPort] = await Promise.all([freePort(), freePort()]);
    issuer = `http://127.0.0.1:${oidcPort}`;
    apiBase = `http://127.0.0.1:${apiPort}`;
    const provider = new Provider(issuer, {
      clients: [
        {
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          redirect_uris: [`${apiBase}/auth/callback/oidc`],
          grant_types: ['authorization_code'],
          response_types: ['code'],
        },
      ],
      claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
      findAccount: async (_ctx, id) => {
        const profile = accounts.get(id);
        if (!profile) return undefined;
        return { accountId: id, claims: async () => ({ sub: id, ...profile }) };
      },
      features: { devInteractions: { enabled: true } },
      cookies: { keys: ['test-cookie-key-0123456789'] },
      ttl: { Interaction: 600, Session: 600, Grant: 600, AccessToken: 600, IdToken: 600 },
    });
    oidcServer = createServer(provider.callback());
    oidcServer.listen(oidcPort, '127.0.0.1');
    await once(oidcServer, 'listening');

    env = await createTestEnv({
      API_BASE_URL: apiBase,
      SOCIAL_PROVIDER: 'oidc',
      SOCIAL_ISSUER: issuer,
      SOCIAL_CLIENT_ID: CLIENT_ID,
      SOCIAL_CLIENT_SECRET: CLIENT_SECRET,
      ADMIN_EMAILS: 'alice.oidc@example.test',
    });
    app = await env.app();
    await app.listen({ port: apiPort, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await env?.close();
    oidcServer?.close();
  });

  it('signs in through the provider and lands on a session', async () => {
    const browser = new Browser();
    const start = await browser.request(`${apiBase}/auth/sign-in/social`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: TEST_ORIGIN },
      body: JSON.stringify({ provider: 'oidc', callbackURL: `${TEST_ORIGIN}/after-login` }),
    });
    expect(start.status).toBe(200);
    const { url } = (await start.json()) as { url: string };
    expect(url.startsWith(`${issuer}/`)).toBe(true);
    expect(new URL(url).searchParams.get('redirect_uri')).toBe(`${apiBase}/auth/callback/oidc`);

    // Provider: authorization endpoint → login interaction (HTML form).
    let step = await browser.follow(url);
    let html = await step.res.text();
    let action = html.match(/action="([^"]+)"/)?.[1];
    expect(action, html.slice(0, 300)).toBeDefined();
    let submit = await browser.request(new URL(action ?? '', issuer).toString(), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ prompt: 'login', login: 'alice', password: 'anything' }).toString(),
    });
    // Consent interaction, then back to Herald's callback.
    step = await browser.follow(new URL(submit.headers.get('location') ?? '', issuer).toString());
    html = await step.res.text();
    action = html.match(/action="([^"]+)"/)?.[1];
    expect(action).toBeDefined();
    submit = await browser.request(new URL(action ?? '', issuer).toString(), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ prompt: 'consent' }).toString(),
    });
    const end = await browser.follow(new URL(submit.headers.get('location') ?? '', issuer).toString(), (u) =>
      u.toString().startsWith(TEST_ORIGIN),
    );
    expect(end.url).toBe(`${TEST_ORIGIN}/after-login`);

    const apiHost = new URL(apiBase).host;
    const cookie = browser.cookieHeader(apiHost);
    expect(cookie).toContain('session_token');
    const session = await fetch(`${apiBase}/auth/get-session`, { headers: { cookie } });
    const body = (await session.json()) as {
      user: { email: string; name: string; emailVerified: boolean; role: string };
    };
    expect(body.user).toMatchObject({
      email: 'alice.oidc@example.test',
      name: 'Alice OIDC',
      emailVerified: true,
      role: 'admin',
    });
    const ctx = await app.ctx.sessions.fromHeaders({ cookie });
    expect(ctx?.user.email).toBe('alice.oidc@example.test');
  });

  it('refuses a session while the provider has not verified the email, and sends a verification link', async () => {
    const browser = new Browser();
    const end = await socialSignIn(browser, 'mallory');
    expect(end.startsWith(`${TEST_ORIGIN}/login-error`), end).toBe(true);
    expect(new URL(end).searchParams.get('error')).toBe('email_not_verified');
    expect(browser.cookieHeader(new URL(apiBase).host)).not.toContain('session_token');
    const mail = await env.smtp.waitFor(
      (m) => m.to.includes('mallory.oidc@example.test') && m.subject.includes('Verify'),
    );
    expect(mail.text).toContain(`${TEST_ORIGIN}/verify-email?token=`);
  });

  it('never signs into an existing account through a provider that did not verify its email', async () => {
    const victim = await createVerifiedUser(app, env.smtp, { email: VICTIM_EMAIL });
    const browser = new Browser();
    const end = await socialSignIn(browser, 'eve');
    expect(end.startsWith(`${TEST_ORIGIN}/login-error`), end).toBe(true);
    expect(browser.cookieHeader(new URL(apiBase).host)).not.toContain('session_token');
    const linked = await app.ctx.database.db
      .select()
      .from(accountTable)
      .where(eq(accountTable.userId, victim.id));
    expect(linked.map((a) => a.providerId)).toEqual(['credential']);
  });

  it('rejects unknown providers and a callback without state', async () => {
    const bad = await fetch(`${apiBase}/auth/sign-in/social`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: TEST_ORIGIN },
      body: JSON.stringify({ provider: 'nope' }),
    });
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect(bad.status).toBeLessThan(500);
    const callback = await fetch(`${apiBase}/auth/callback/oidc?code=x&state=y`, { redirect: 'manual' });
    expect(callback.status).toBeLessThan(500);
    expect(callback.headers.get('set-cookie') ?? '').not.toContain('session_token=');
  });
});

describe('social sign-in with a well-known provider', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv({
      SOCIAL_PROVIDER: 'github',
      SOCIAL_CLIENT_ID: 'gh-client',
      SOCIAL_CLIENT_SECRET: 'gh-secret',
    });
  });
  afterAll(() => env.close());

  it('redirects to the provider with the contract callback path', async () => {
    const app = await env.app();
    const res = await app.inject({
      method: 'POST',
      url: '/auth/sign-in/social',
      headers: { 'content-type': 'application/json', origin: TEST_ORIGIN },
      payload: { provider: 'github' },
    });
    expect(res.statusCode, res.body).toBe(200);
    const url = new URL(res.json().url);
    expect(url.host).toBe('github.com');
    expect(url.searchParams.get('client_id')).toBe('gh-client');
    expect(url.searchParams.get('redirect_uri')).toBe('http://localhost:3001/auth/callback/github');
  });
});
