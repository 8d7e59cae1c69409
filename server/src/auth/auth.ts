// Owns the better-auth instance: plugins, email hooks, session storage and password hashing.
import { randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';
import { drizzleAdapter } from '@better-auth/drizzle-adapter';
import { betterAuth } from 'better-auth';
import { admin, magicLink, username } from 'better-auth/plugins';
import type { Config } from '../config.js';
import type { Store } from '../infra/cache.js';
import type { Db } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import { actionEmail, type Mailer } from '../infra/mailer.js';
import * as schema from '../infra/schema/index.js';

const scrypt = promisify(scryptCb) as (
  password: string,
  salt: Buffer,
  keylen: number,
  options: object,
) => Promise<Buffer>;
// N=2^14, r=8 (~16 MiB, tens of ms) runs on libuv's thread pool instead of blocking the event loop.
const SCRYPT = { N: 16384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };
const KEY_LEN = 64;

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password.normalize('NFKC'), salt, KEY_LEN, SCRYPT);
  return `scrypt$${salt.toString('hex')}$${key.toString('hex')}`;
}

export async function verifyPassword({
  hash,
  password,
}: {
  hash: string;
  password: string;
}): Promise<boolean> {
  const [scheme, saltHex, keyHex] = hash.split('$');
  if (scheme !== 'scrypt' || !saltHex || !keyHex) return false;
  const expected = Buffer.from(keyHex, 'hex');
  const actual = await scrypt(
    password.normalize('NFKC'),
    Buffer.from(saltHex, 'hex'),
    expected.length,
    SCRYPT,
  );
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

export const ACCESS_TOKEN_TTL_S = 15 * 60;

export interface AuthDeps {
  config: Config;
  db: Db;
  store: Store;
  mailer: Mailer;
  logger: Logger;
}

export function createAuth({ config, db, store, mailer, logger }: AuthDeps) {
  const feLink = (page: string, token: string) =>
    `${config.FE_BASE_URL}/${page}?token=${encodeURIComponent(token)}`;
  const send = (mail: Parameters<Mailer['send']>[0]) => {
    // Never block or fail the auth request on SMTP; the user can ask for another link.
    mailer
      .send(mail)
      .catch((err: unknown) => logger.error({ err, to: mail.to }, 'failed to send auth email'));
  };
  const authPrefix = 'auth:';

  return betterAuth({
    appName: 'Herald',
    baseURL: config.API_BASE_URL,
    basePath: '/auth',
    secret: config.AUTH_SECRET,
    trustedOrigins: [...new Set([...config.CORS_ALLOWLISTED_ORIGINS, new URL(config.FE_BASE_URL).origin])],
    database: drizzleAdapter(db, { provider: 'pg', schema, camelCase: false }),
    secondaryStorage: {
      get: (key) => store.get(authPrefix + key),
      getAndDelete: (key) => store.getdel(authPrefix + key),
      set: (key, value, ttl) => store.set(authPrefix + key, value, ttl ? ttl * 1000 : undefined),
      delete: (key) => store.del(authPrefix + key),
      increment: async (key, ttl) => (await store.incrWindow(authPrefix + key, ttl * 1000)).count,
    },
    session: {
      // Keep sessions in PostgreSQL too, so an empty or unreachable store never signs everybody out.
      storeSessionInDatabase: true,
      cookieCache: { enabled: true, maxAge: ACCESS_TOKEN_TTL_S },
    },
    emailAndPassword: {
      enabled: true,
      requireEmailVerification: true,
      minPasswordLength: 8,
      maxPasswordLength: 128,
      revokeSessionsOnPasswordReset: true,
      password: { hash: hashPassword, verify: verifyPassword },
      sendResetPassword: async ({ user, token }) => {
        send(
          actionEmail({
            to: user.email,
            subject: 'Reset your Herald password',
            intro: `Hello ${user.name}, someone asked to reset the password of this account. If it was not you, ignore this email.`,
            actionLabel: 'Choose a new password',
            url: feLink('reset-password', token),
          }),
        );
      },
    },
    emailVerification: {
      sendOnSignUp: true,
      sendOnSignIn: true,
      sendVerificationEmail: async ({ user, token }) => {
        send(
          actionEmail({
            to: user.email,
            subject: 'Verify your email for Herald',
            intro: `Hello ${user.name}, confirm your email address to finish creating your account.`,
            actionLabel: 'Verify email',
            url: feLink('verify-email', token),
          }),
        );
      },
    },
    rateLimit: {
      enabled: true,
      storage: 'secondary-storage',
      window: 60,
      max: 300,
      customRules: {
        '/sign-in/email': { window: config.AUTH_RATE_LIMIT_WINDOW_S, max: config.AUTH_RATE_LIMIT_MAX },
        '/sign-in/username': { window: config.AUTH_RATE_LIMIT_WINDOW_S, max: config.AUTH_RATE_LIMIT_MAX },
        '/sign-up/email': { window: config.AUTH_RATE_LIMIT_WINDOW_S, max: config.AUTH_RATE_LIMIT_MAX },
        '/sign-in/magic-link': { window: config.AUTH_RATE_LIMIT_WINDOW_S, max: config.AUTH_RATE_LIMIT_MAX },
        '/request-password-reset': {
          window: config.AUTH_RATE_LIMIT_WINDOW_S,
          max: config.AUTH_RATE_LIMIT_MAX,
        },
        '/forget-password': { window: config.AUTH_RATE_LIMIT_WINDOW_S, max: config.AUTH_RATE_LIMIT_MAX },
        '/reset-password': { window: config.AUTH_RATE_LIMIT_WINDOW_S, max: config.AUTH_RATE_LIMIT_MAX },
      },
    },
    advanced: {
      useSecureCookies: config.API_BASE_URL.startsWith('https:'),
      defaultCookieAttributes: { sameSite: config.COOKIE_SAME_SITE, httpOnly: true },
      // The bridge sets x-herald-client-ip from the socket (or from the proxy chain when TRUST_PROXY is set),
      // replacing anything the client sent, so rate limits cannot be dodged with a forged header.
      ipAddress: { ipAddressHeaders: ['x-herald-client-ip'] },
    },
    plugins: [
      username(),
      magicLink({
        expiresIn: 15 * 60,
        sendMagicLink: async ({ email, token }) => {
          send(
            actionEmail({
              to: email,
              subject: 'Your Herald sign-in link',
              intro: 'Use this link to sign in. It expires in 15 minutes and works once.',
              actionLabel: 'Sign in',
              url: feLink('magic-link', token),
            }),
          );
        },
      }),
      admin(),
    ],
    telemetry: { enabled: false },
  });
}

export type Auth = ReturnType<typeof createAuth>;
