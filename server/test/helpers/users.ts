// Signs users up, verifies and signs them in through the real endpoints, reading the real captured email.
import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import type { App } from '../../src/app.js';
import { user as userTable } from '../../src/infra/schema/index.js';
import { TEST_ORIGIN } from './app.js';
import { type TestSmtp, tokenFrom } from './smtp.js';

export interface TestUser {
  id: string;
  email: string;
  password: string;
  name: string;
  username?: string;
  /** Cookie header value carrying the session. */
  cookie: string;
}

/** Joins the Set-Cookie headers of a response into a Cookie request header value. */
export function cookieFrom(setCookie: string | string[] | undefined): string {
  const list = Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : [];
  return list
    .map((c) => c.split(';')[0] ?? '')
    .filter((c) => c && !c.endsWith('='))
    .join('; ');
}

export const jsonHeaders = (cookie?: string): Record<string, string> => ({
  'content-type': 'application/json',
  origin: TEST_ORIGIN,
  ...(cookie ? { cookie } : {}),
});

/**
 * An injected request as `user` (or a guest): with a payload, as JSON; without one, no content type at all (an
 * empty body declared as JSON is a 400).
 */
export function requestAs(
  app: App,
  user: Pick<TestUser, 'cookie'> | null,
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE',
  url: string,
  payload?: unknown,
) {
  return app.inject({
    method,
    url,
    headers:
      payload === undefined
        ? { origin: TEST_ORIGIN, ...(user ? { cookie: user.cookie } : {}) }
        : jsonHeaders(user?.cookie),
    ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
  });
}

export function uniqueEmail(tag = 'user'): string {
  return `${tag}-${randomBytes(5).toString('hex')}@example.test`;
}

export async function signIn(app: App, email: string, password: string): Promise<string> {
  const res = await app.inject({
    method: 'POST',
    url: '/auth/sign-in/email',
    headers: jsonHeaders(),
    payload: { email, password },
  });
  if (res.statusCode !== 200) throw new Error(`sign-in failed: ${res.statusCode} ${res.body}`);
  return cookieFrom(res.headers['set-cookie']);
}

/** Full cycle: sign-up → verification email → verify → sign-in. */
export async function createVerifiedUser(
  app: App,
  smtp: TestSmtp,
  opts: { email?: string; password?: string; name?: string; username?: string } = {},
): Promise<TestUser> {
  const email = (opts.email ?? uniqueEmail()).toLowerCase();
  const password = opts.password ?? 'correct horse battery';
  const name = opts.name ?? email.split('@')[0] ?? 'user';
  const signUp = await app.inject({
    method: 'POST',
    url: '/auth/sign-up/email',
    headers: jsonHeaders(),
    payload: { email, password, name, ...(opts.username ? { username: opts.username } : {}) },
  });
  if (signUp.statusCode !== 200) throw new Error(`sign-up failed: ${signUp.statusCode} ${signUp.body}`);
  const id = (signUp.json() as { user: { id: string } }).user.id;
  const mail = await smtp.waitFor((m) => m.to.includes(email) && m.subject.includes('Verify'));
  const verify = await app.inject({
    method: 'GET',
    url: `/auth/verify-email?token=${encodeURIComponent(tokenFrom(mail, 'verify-email'))}`,
  });
  if (verify.statusCode !== 200) throw new Error(`verify failed: ${verify.statusCode} ${verify.body}`);
  const cookie = await signIn(app, email, password);
  return { id, email, password, name, username: opts.username, cookie };
}

/** Promotes a user to admin in the database and signs in again so the session carries the role. */
export async function createAdmin(app: App, smtp: TestSmtp): Promise<TestUser> {
  const u = await createVerifiedUser(app, smtp, { name: 'Admin' });
  await app.ctx.database.db.update(userTable).set({ role: 'admin' }).where(eq(userTable.id, u.id));
  return { ...u, cookie: await signIn(app, u.email, u.password) };
}
