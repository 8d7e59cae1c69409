// Owns the better-auth instance: plugins, email hooks, session storage and password hashing.
import { randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';
import { drizzleAdapter } from '@better-auth/drizzle-adapter';
import { type BetterAuthPlugin, betterAuth } from 'better-auth';
import { createAuthMiddleware } from 'better-auth/api';
import { admin, magicLink, openAPI, username } from 'better-auth/plugins';
import { sql } from 'drizzle-orm';
import { z } from 'zod';
import { type Config, normalizeLocale } from '../config.js';
import type { EventOutbox } from '../events/outbox.js';
import type { ErrorBody } from '../http/errors.js';
import type { Db } from '../infra/db.js';
import type { EmailOutbox } from '../infra/email-outbox.js';
import type { Logger } from '../infra/logger.js';
import * as schema from '../infra/schema/index.js';
import type { Store } from '../infra/store.js';
import type { Realtime, UserDisconnect } from '../realtime/index.js';
import { type AuthEmails, createAccountEmailSender } from './account-emails.js';

export type { AuthEmails } from './account-emails.js';

import { createAuthStorage } from './auth-storage.js';
import type { Revocation } from './revocation.js';
import { socialSignIn } from './social.js';

export { AUTH_STORE_PREFIX } from './revocation.js';

import {
  assertNotLastAdmin,
  checkAuthRequestBody,
  fitProviderProfile,
  LOCALE_MAX_CHARS,
  validBanReason,
  validDisplayUsername,
  validImage,
  validLocale,
  validName,
  validRole,
} from './account-rules.js';
import { withContractErrors } from './responses.js';

/** The user.created event's payload: named fields only, so nothing internal ever reaches a consumer. */
export interface UserCreatedEvent {
  id: string;
  name: string;
  email: string;
  emailVerified: boolean;
  image: string | null;
  role: string;
  createdAt: string;
  updatedAt: string;
}

declare module '../events/outbox.js' {
  interface DomainEventMap {
    'user.created': UserCreatedEvent;
  }
}

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

/** Credential-guessing and mail-sending endpoints: limited per client IP, shared across instances. */
const SENSITIVE_AUTH_PATHS = [
  '/sign-in/email',
  '/sign-in/username',
  '/sign-up/email',
  '/sign-in/magic-link',
  '/request-password-reset',
  '/forget-password',
  '/reset-password',
] as const;

export const ACCESS_TOKEN_TTL_S = 15 * 60;
/** Session lifetime and sliding refresh: extended at most once a day, so refreshes never cost a write per request. */
export const SESSION_TTL_S = 7 * 24 * 60 * 60;
export const SESSION_UPDATE_AGE_S = 24 * 60 * 60;

/**
 * Users created by following a link rather than by typed input: a social/OIDC provider's profile, or a
 * magic-link sign-up (whose name was checked when the link was requested, and may be empty). Their profile text
 * is fitted rather than refused, so the sign-in is not lost.
 */
function isProviderFlow(path: string | undefined): boolean {
  return (
    path !== undefined && /^\/(callback|oauth2|sign-in\/social|sign-in\/oauth2|magic-link\/verify)/.test(path)
  );
}

/** `locale` on the user (CONTRACT §12): a BCP 47 tag, stored in canonical case; null clears it. */
const LocaleInputSchema = z
  .string()
  .max(LOCALE_MAX_CHARS)
  .refine((v) => normalizeLocale(v) !== null, {
    message: 'locale must be a BCP 47 language tag such as en or de-AT',
  })
  .nullable();

export interface AuthDeps {
  config: Config;
  db: Db;
  store: Store;
  /** Auth emails go through the durable queue so an SMTP outage delays them instead of losing them. */
  outbox: Pick<EmailOutbox, 'enqueue'>;
  emails: AuthEmails;
  logger: Logger;
  /** Cluster-wide connection closing on ban, sign-out, revocation and password reset. */
  realtime?: Pick<Realtime, 'disconnectUser'>;
  /** Durable repair of auth store writes lost to an outage, and the per-user revocation markers. */
  revocation: Revocation;
  /** Where user.created is written (events/outbox.ts). */
  events?: Pick<EventOutbox, 'write'>;
}

/** The user's stored locale tag (null when unset, so the renderer uses DEFAULT_LOCALE). */
const localeOf = (user: object): string | null => {
  const locale = (user as { locale?: unknown }).locale;
  return typeof locale === 'string' ? locale : null;
};

/**
 * The user fields that reach the signed session snapshot cookie and that no better-auth check bounds, checked on
 * every write whatever the route (admin update-user hands its `data` to the database as it is): the display
 * username, the locale and the ban reason. The request-level check (checkAuthRequestBody) answers first with the
 * field's path; this one keeps a server-side caller or a future route from storing what a client could not.
 */
function checkedSnapshotFields(data: object): Record<string, unknown> {
  const { displayUsername, locale, banReason } = data as Record<string, unknown>;
  const checked: Record<string, unknown> = {};
  if (displayUsername !== undefined && displayUsername !== null) {
    checked.displayUsername = validDisplayUsername(displayUsername);
  }
  if (locale !== undefined) checked.locale = validLocale(locale);
  if (banReason !== undefined) checked.banReason = validBanReason(banReason);
  return checked;
}

/** Maps the better-auth endpoint that ended a session to the reason real-time clients are told. */
function disconnectReason(path: string | undefined): UserDisconnect['reason'] {
  if (path === '/sign-out') return 'signed_out';
  if (path === '/admin/ban-user') return 'banned';
  if (path === '/reset-password' || path === '/change-password') return 'password_reset';
  return 'session_revoked';
}

export function createAuth({
  config,
  db,
  store,
  outbox,
  emails,
  logger,
  realtime,
  revocation,
  events,
}: AuthDeps) {
  const send = createAccountEmailSender({ db, outbox, emails, logger });
  const feLink = (page: string, token: string) =>
    `${config.FE_BASE_URL}/${page}?token=${encodeURIComponent(token)}`;
  const { socialProviders, socialPlugins } = socialSignIn(config);
  const disconnect = async (event: UserDisconnect) => {
    if (!realtime) return;
    try {
      await realtime.disconnectUser(event);
    } catch (err) {
      // The session is already gone from the store and database; a failed fan-out only leaves sockets open
      // until their next session check, so it must not fail the request.
      logger.error({ err, userId: event.userId }, 'failed to publish user disconnect');
    }
  };
  // ADMIN_EMAILS promotion: one conditional UPDATE, a no-op for everyone not listed or already admin.
  const promoteIfListed = async (userId: string) => {
    if (config.ADMIN_EMAILS.length === 0) return;
    await db.execute(
      sql`update "user" set role = 'admin', updated_at = now()
          where id = ${userId} and email_verified and lower(email) in (${sql.join(
            config.ADMIN_EMAILS.map((e) => sql`${e}`),
            sql`, `,
          )}) and role is distinct from 'admin'`,
    );
  };
  // Answers a body the bridge refused (auth/bridge.ts, BODY_REFUSED_HEADER: broken or too deeply nested JSON, NUL,
  // an unsupported content type) after better-auth's router has counted the request against the route's rate
  // limit (its onRequest runs the limiter before plugins').
  const bodyGuard: BetterAuthPlugin = {
    id: 'herald-body-guard',
    onRequest: async (request) => {
      const refusal = decodeBodyRefusal(request.headers.get(BODY_REFUSED_HEADER));
      return refusal ? { response: Response.json(refusal.body, { status: refusal.status }) } : undefined;
    },
  };

  const sensitiveRule = { window: config.AUTH_RATE_LIMIT_WINDOW_S, max: config.AUTH_RATE_LIMIT_MAX };
  const instance = betterAuth({
    // The product's own name (APP_NAME): better-auth uses it e.g. as the issuer of its own messages.
    appName: config.APP_NAME,
    baseURL: config.API_BASE_URL,
    basePath: '/auth',
    secret: config.AUTH_SECRET,
    trustedOrigins: config.trustedOrigins,
    database: drizzleAdapter(db, { provider: 'pg', schema, camelCase: false }),
    user: {
      additionalFields: {
        // The language of the user's emails (and the web app's default); set at sign-up or through update-user.
        locale: {
          type: 'string',
          required: false,
          input: true,
          returned: true,
          validator: { input: LocaleInputSchema },
          transform: { input: (v) => (typeof v === 'string' ? normalizeLocale(v) : null) },
        },
      },
    },
    secondaryStorage: createAuthStorage({ store, logger, revocation }),
    // Verification values (email links, reset and magic-link tokens) in PostgreSQL as well, so they can be issued
    // and redeemed while the store is unreachable; identifiers hashed, so a read of the store or the table (a
    // dump, a replica, a MONITOR) does not hand out working links.
    verification: { storeInDatabase: true, storeIdentifier: 'hashed' },
    session: {
      // Keep sessions in PostgreSQL too, so an empty or unreachable store never signs everybody out.
      storeSessionInDatabase: true,
      expiresIn: SESSION_TTL_S,
      updateAge: SESSION_UPDATE_AGE_S,
      // The 15-minute access credential: a signed snapshot cookie re-issued by /auth/get-session. Server-side
      // checks never trust it alone (see docs/architecture.md, "Sessions").
      cookieCache: { enabled: true, maxAge: ACCESS_TOKEN_TTL_S },
    },
    socialProviders,
    // A provider login joins an existing account of the same email only when the provider says it verified that
    // email (and the local account is verified). No provider is "trusted" to skip this: one that lets users claim
    // any address unverified would otherwise hand over the local account of that address.
    account: { accountLinking: { enabled: true, requireLocalEmailVerified: true } },
    databaseHooks: {
      user: {
        update: {
          // Every profile, role or ban change goes through here, whichever endpoint made it.
          before: async (data, ctx) => {
            const checked = checkedSnapshotFields(data);
            if (data.name !== undefined) checked.name = validName(data.name);
            if (data.image !== undefined) checked.image = validImage(data.image);
            if (data.role !== undefined) checked.role = validRole(data.role);
            const target = (ctx?.body as { userId?: unknown } | undefined)?.userId;
            const demotes = checked.role !== undefined && checked.role !== 'admin';
            if (typeof target === 'string' && (demotes || data.banned === true)) {
              await assertNotLastAdmin(db, target);
            }
            return { data: { ...data, ...checked } };
          },
          after: async (user) => {
            // Role, ban or profile changed: live connections re-check this user (their snapshot may be stale).
            revocation.touched(user.id);
            if (user.emailVerified) await promoteIfListed(user.id);
          },
        },
        delete: {
          before: async (user) => {
            await assertNotLastAdmin(db, user.id);
          },
        },
        create: {
          before: async (user, ctx) => {
            const role = (user as { role?: unknown }).role;
            const checked = { ...(role === undefined ? {} : { role: validRole(role) }) };
            if (isProviderFlow(ctx?.path)) {
              return { data: { ...user, ...checked, ...fitProviderProfile(user.name, user.image) } };
            }
            return {
              data: {
                ...user,
                ...checked,
                ...checkedSnapshotFields(user),
                name: validName(user.name),
                image: validImage(user.image),
              },
            };
          },
          after: async (user) => {
            // Social sign-up with a provider-verified email is the "verify" moment for such accounts.
            if (user.emailVerified) await promoteIfListed(user.id);
            // Right after the insert (better-auth gives no hook inside its transaction). Named fields only,
            // so nothing internal ever reaches a receiver.
            if (events) {
              const u = user as typeof user & { role?: string | null };
              await events
                .write(db, [
                  {
                    type: 'user.created',
                    data: {
                      id: u.id,
                      name: u.name,
                      email: u.email,
                      emailVerified: u.emailVerified,
                      image: u.image ?? null,
                      role: u.role ?? 'user',
                      createdAt: new Date(u.createdAt).toISOString(),
                      updatedAt: new Date(u.updatedAt).toISOString(),
                    },
                  },
                ])
                .catch((err: unknown) =>
                  logger.error({ err, userId: u.id }, 'user.created event not queued'),
                );
            }
          },
        },
      },
      session: {
        create: {
          // Before the session is mirrored into the store, so the stored snapshot already carries the role.
          before: async (session) => {
            await promoteIfListed(session.userId);
          },
        },
        delete: {
          after: async (session, ctx) => {
            revocation.touched(session.userId);
            // A ban closes everything of the user at once (hooks.after below); one event per session is noise.
            if (ctx?.path === '/admin/ban-user') return;
            await disconnect({
              userId: session.userId,
              sessionId: session.id,
              reason: disconnectReason(ctx?.path),
            });
          },
        },
      },
    },
    hooks: {
      before: createAuthMiddleware(async (ctx) => {
        // Runs before the plugins' hooks and the route's schema: bad input is a 400 before the username plugin
        // can trip over it (a non-string username was a 500) and before anything is written.
        checkAuthRequestBody(ctx.path, ctx.body);
        // A magic-link sign-up creates the user only when the link is followed; check the name now, before an
        // email is sent, so the request (not the later link) gets the 400.
        const name = (ctx.body as { name?: unknown } | undefined)?.name;
        if (ctx.path === '/sign-in/magic-link' && name !== undefined) validName(name);
      }),
      after: createAuthMiddleware(async (ctx) => {
        const returned: unknown = ctx.context.returned;
        if (returned instanceof Error) return;
        const body = (ctx.body ?? {}) as { userId?: unknown };
        if (ctx.path.startsWith('/admin/') && typeof body.userId === 'string')
          revocation.touched(body.userId);
        if (ctx.path === '/admin/ban-user' && typeof body.userId === 'string') {
          await disconnect({ userId: body.userId, reason: 'banned' });
        }
        // Open chat sockets carry the identity (role, verified) they connected with; after an admin changes it
        // they reconnect, so a demoted admin cannot keep moderating over an old socket.
        if (
          (ctx.path === '/admin/set-role' || ctx.path === '/admin/update-user') &&
          typeof body.userId === 'string'
        ) {
          await disconnect({ userId: body.userId, reason: 'account_changed' });
        }
      }),
    },
    emailAndPassword: {
      enabled: true,
      requireEmailVerification: true,
      minPasswordLength: 8,
      maxPasswordLength: 128,
      revokeSessionsOnPasswordReset: true,
      password: { hash: hashPassword, verify: verifyPassword },
      // No user-chosen text in account emails (templates have no name variable): the address may belong to
      // someone who never signed up (content spoofing).
      sendResetPassword: async ({ user, token }) => {
        void send('reset', token, user.email, localeOf(user), feLink('reset-password', token));
      },
    },
    emailVerification: {
      sendOnSignUp: true,
      sendOnSignIn: true,
      sendVerificationEmail: async ({ user, token }) => {
        void send('verify', token, user.email, localeOf(user), feLink('verify-email', token));
      },
    },
    rateLimit: {
      enabled: true,
      storage: 'secondary-storage',
      window: 60,
      max: 300,
      customRules: {
        ...Object.fromEntries(SENSITIVE_AUTH_PATHS.map((path) => [path, sensitiveRule])),
        // A cookie-authenticated read that front ends poll; limiting it per IP would lock out users behind one NAT.
        '/get-session': false,
      },
    },
    advanced: {
      useSecureCookies: config.API_BASE_URL.startsWith('https:'),
      // better-auth skips its CSRF/origin check when NODE_ENV=test; keep it on so tests exercise production.
      disableOriginCheck: false,
      defaultCookieAttributes: { sameSite: config.COOKIE_SAME_SITE, httpOnly: true },
      // The bridge sets x-herald-client-ip from the socket (or from the proxy chain when TRUST_PROXY is set),
      // replacing anything the client sent, so rate limits cannot be dodged with a forged header.
      ipAddress: { ipAddressHeaders: ['x-herald-client-ip'] },
    },
    plugins: [
      bodyGuard,
      // Only for describing /auth/* in Herald's OpenAPI document (auth/openapi.ts); its Scalar page is off.
      openAPI({ disableDefaultReference: true }),
      username(),
      magicLink({
        expiresIn: 15 * 60,
        // Stored as a hash: the raw token exists only in the email (see also verification.storeIdentifier).
        storeToken: 'hashed',
        sendMagicLink: async ({ email, token }) => {
          // No user object here: the locale is looked up by address (DEFAULT_LOCALE for a sign-up by link).
          void send('magic-link', token, email, undefined, feLink('magic-link', token));
        },
      }),
      admin(),
      ...socialPlugins,
    ],
    telemetry: { enabled: false },
    // Unexpected (non-API) errors reach the bridge, which answers 503 during a store outage and otherwise lets
    // the global handler log them and answer a detail-free 500.
    onAPIError: { throw: true },
    // Route better-auth's own messages into the request logger (JSON, levels, silenced in tests).
    logger: {
      level: 'warn',
      log: (level, message, ...args) => {
        const extra = args.length > 0 ? { args: args.map((a) => (a instanceof Error ? a.message : a)) } : {};
        // Refused origins, callback URLs and cross-site sign-ins are what any client can cause at will: logged
        // at error level they would let anyone flood the error log (and its alerts). They are warnings.
        if (level === 'error' && !CLIENT_CAUSED.test(message)) {
          logger.error(extra, `better-auth: ${message}`);
        } else if (level === 'error' || level === 'warn') logger.warn(extra, `better-auth: ${message}`);
        else logger.debug(extra, `better-auth: ${message}`);
      },
    },
  });
  // better-auth's own 429 (no code) and empty 404s answered in the contract's error body; see responses.ts.
  const handler = instance.handler;
  return Object.assign(instance, {
    handler: async (request: Request) =>
      withContractErrors(await handler(request), new URL(request.url).pathname),
  });
}

/** better-auth error-level messages that a request alone can trigger (see the logger option above). */
const CLIENT_CAUSED =
  /^(Invalid (origin|callbackURL|redirectURL|errorCallbackURL|newUserCallbackURL)\b|Blocked cross-site|Delete user is disabled|State not found|Failed to parse state|Provider not found\b|INVALID_CALLBACK_REQUEST|No callback URL found)/;

export type Auth = ReturnType<typeof createAuth>;

/** No better-auth route takes a body nested deeper than a few levels; 32 leaves room for `data`-like objects. */
export const MAX_AUTH_BODY_DEPTH = 32;
/**
 * Set by the bridge (and dropped from what clients send) on a request whose body was refused: better-auth's
 * router runs its rate limit first and then the body-guard plugin answers with the refusal, so a malformed
 * request counts against the route's limit like any other (CONTRACT §8). Its value is encodeBodyRefusal's.
 */
export const BODY_REFUSED_HEADER = 'x-herald-body-refused';

/** The 4xx a refused /auth body gets, in the contract's error shape. */
export interface BodyRefusal {
  status: number;
  body: ErrorBody;
}

/** A header-safe form of the refusal (percent-encoded JSON: the details may name any body key). */
export function encodeBodyRefusal(refusal: BodyRefusal): string {
  return encodeURIComponent(JSON.stringify(refusal));
}

const FALLBACK_REFUSAL: BodyRefusal = {
  status: 400,
  body: { code: 'INVALID_JSON', message: 'Body must be valid JSON' },
};

export function decodeBodyRefusal(value: string | null): BodyRefusal | undefined {
  if (!value) return undefined;
  try {
    const parsed = JSON.parse(decodeURIComponent(value)) as Partial<BodyRefusal>;
    const { status, body } = parsed;
    if (typeof status === 'number' && status >= 400 && status < 500 && typeof body?.code === 'string') {
      return { status, body };
    }
  } catch {
    // Only the bridge sets the header; anything unreadable still refuses the body.
  }
  return FALLBACK_REFUSAL;
}
