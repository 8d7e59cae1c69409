// Owns request authentication for Herald's own routes (notifications, chat, admin, metrics).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { eq } from 'drizzle-orm';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { forbidden, unauthorized } from '../http/errors.js';
import { BoundedMap } from '../infra/bounded-map.js';
import type { Db } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import { session as sessionTable, user as userTable } from '../infra/schema/index.js';
import type { Store } from '../infra/store.js';
import { isBanActive } from './accounts.js';
import type { Auth } from './auth.js';
import { AUTH_STORE_PREFIX, type Revocation } from './revocation.js';

export interface AuthUser {
  id: string;
  email: string;
  name: string;
  image: string | null;
  emailVerified: boolean;
  role: string;
  banned: boolean;
}

export interface AuthSession {
  id: string;
  token: string;
  userId: string;
  expiresAt: Date;
}

export interface AuthContext {
  user: AuthUser;
  session: AuthSession;
}

export interface SessionResolver {
  /** Resolves the session from request headers (cookie). Null when absent, invalid, expired or banned. */
  fromHeaders(headers: Headers | Record<string, string | string[] | undefined>): Promise<AuthContext | null>;
  /** The session token of a correctly signed session cookie (not checked for liveness), or null. */
  tokenFromHeaders(headers: Headers | Record<string, string | string[] | undefined>): Promise<string | null>;
  /**
   * The user a session token belonged to when this instance last resolved it (no lookup; undefined before the
   * first). Only for counting requests per user (http/client-limits.ts), never for authorising one.
   */
  knownUserId(token: string): string | undefined;
  /**
   * The live store record behind a token, only when the hot path can vouch for it: the store is trusted, holds
   * the record, and the session is neither expired nor banned. Null in every other case (no fallback to
   * PostgreSQL): for the get-session fast path (auth/session-read.ts), which then leaves the answer to better-auth.
   */
  storedSession(token: string): Promise<StoredSessionHit | null>;
}

/** A store record the hot path accepted: its exact text (a cache key for renderings of it) and its parse. */
export interface StoredSessionHit {
  raw: string;
  parsed: StoredSession;
  context: AuthContext;
}

export interface SessionResolverDeps {
  store: Store;
  db: Db;
  logger: Logger;
  revocation: Revocation;
}

/** Counters for tests and metrics: where session lookups were served from. */
export interface SessionLookupStats {
  store: number;
  database: number;
  storeErrors: number;
}

function cookieHeader(input: Headers | Record<string, string | string[] | undefined>): string | undefined {
  if (input instanceof Headers) return input.get('cookie') ?? undefined;
  const v = input.cookie ?? input.Cookie;
  return Array.isArray(v) ? v.join('; ') : v;
}

/** Is `c` white space as `String.prototype.trim` sees it (what the split-and-trim reading ignores around a name). */
const isBlank = (c: string | undefined) => c !== undefined && c.trim() === '';

/**
 * Value of one cookie, URL-decoded; the first occurrence wins (as in better-auth's own parser). The same answer as
 * splitting the header on `;` and trimming each name, without the copies: a signed-in request's header carries
 * the 1.9 KB session snapshot, and every request reads it two or three times (client limits, the guard).
 */
export function readCookie(header: string, name: string): string | undefined {
  for (let at = header.indexOf(name); at >= 0; at = header.indexOf(name, at + 1)) {
    let before = at - 1;
    while (isBlank(header[before])) before--;
    if (before >= 0 && header[before] !== ';') continue;
    let eq = at + name.length;
    while (isBlank(header[eq])) eq++;
    if (header[eq] !== '=') continue;
    const end = header.indexOf(';', eq + 1);
    const raw = header.slice(eq + 1, end < 0 ? header.length : end).trim();
    try {
      return decodeURIComponent(raw);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** Verifies better-auth's signed cookie format `value.base64(HMAC-SHA256(value))`; returns the value. */
export function verifySignedValue(signed: string, secret: string): string | null {
  const dot = signed.lastIndexOf('.');
  if (dot < 1) return null;
  const value = signed.slice(0, dot);
  const signature = signed.slice(dot + 1);
  if (signature.length !== 44 || !signature.endsWith('=')) return null;
  const expected = createHmac('sha256', secret).update(value).digest();
  const given = Buffer.from(signature, 'base64');
  return given.length === expected.length && timingSafeEqual(given, expected) ? value : null;
}

export function signValue(value: string, secret: string): string {
  return `${value}.${createHmac('sha256', secret).update(value).digest('base64')}`;
}

export interface StoredSession {
  session: { id: string; token: string; userId: string; expiresAt: string | Date; createdAt?: string | Date };
  user: {
    id: string;
    email: string;
    name: string;
    image?: string | null;
    emailVerified: boolean;
    role?: string | null;
    banned?: boolean | null;
    banExpires?: string | Date | null;
  };
}

const MISSING = Symbol('missing');

function toContext(s: StoredSession): AuthContext | null {
  const expiresAt = new Date(s.session.expiresAt);
  if (!(expiresAt.getTime() > Date.now())) return null;
  const u = s.user;
  const banned = isBanActive(u);
  if (banned) return null;
  return {
    user: {
      id: u.id,
      email: u.email,
      name: u.name,
      image: u.image ?? null,
      emailVerified: u.emailVerified,
      role: u.role ?? 'user',
      banned,
    },
    session: { id: s.session.id, token: s.session.token, userId: s.session.userId, expiresAt },
  };
}

/**
 * The hot-path session check for Herald's own routes. better-auth's getSession costs, per call, an endpoint
 * dispatch, two store reads (session + per-user revocation marker), a cookie re-signing and sometimes a
 * database write; this does one HMAC check and one store round trip (the record and its user's "revoked before"
 * mark, in one MGET once the token's user is known). Revocation stays immediate because every revocation path
 * deletes the session from the store before its request returns or sets that mark (a whole user's sessions),
 * or, when the store cannot be reached, records a durable repair (auth/revocation.ts) and this resolver reads
 * PostgreSQL until the repairs are applied. The database is also consulted when the store has lost the key (e.g. a Redis restart).
 */
export function createSessionResolver(
  auth: Auth,
  deps: SessionResolverDeps,
): SessionResolver & {
  stats: SessionLookupStats;
} {
  const stats: SessionLookupStats = { store: 0, database: 0, storeErrors: 0 };
  // Tokens known to be gone (a token is random and never reused, so this cannot go stale).
  const dead = new BoundedMap<true>(10_000);
  // Signed cookie value → its token, for values whose HMAC already checked out: the check is a pure function of
  // the value (and the secret, fixed for the process), and a polling client sends the same value every time.
  const verified = new BoundedMap<string>(10_000);
  // The last stored record seen per token and its parse: while the store returns the very same text, the parse
  // is reused (expiry and ban are still judged per request by toContext).
  const parsedByToken = new BoundedMap<{ raw: string; parsed: StoredSession }>(10_000);
  const userByToken = new BoundedMap<string>(10_000);
  const remember = (token: string, context: AuthContext | null): AuthContext | null => {
    if (context) userByToken.set(token, context.user.id);
    return context;
  };
  let settings: Promise<{ cookieName: string; secret: string }> | undefined;
  const getSettings = () => {
    settings ??= auth.$context.then((c) => ({
      cookieName: c.authCookies.sessionToken.name,
      secret: c.secret,
    }));
    return settings;
  };

  async function fromDatabase(token: string): Promise<AuthContext | null> {
    stats.database++;
    const rows = await deps.db
      .select({ session: sessionTable, user: userTable })
      .from(sessionTable)
      .innerJoin(userTable, eq(userTable.id, sessionTable.userId))
      .where(eq(sessionTable.token, token))
      .limit(1);
    const row = rows[0];
    if (!row) {
      dead.set(token, true);
      return null;
    }
    return remember(token, toContext(row as StoredSession));
  }

  const tokenFromHeaders = async (
    input: Headers | Record<string, string | string[] | undefined>,
  ): Promise<string | null> => {
    const header = cookieHeader(input);
    if (!header) return null;
    const { cookieName, secret } = await getSettings();
    const signed = readCookie(header, cookieName);
    if (!signed) return null;
    const known = verified.get(signed);
    if (known !== undefined) return known;
    const token = verifySignedValue(signed, secret);
    if (token !== null) verified.set(signed, token);
    return token;
  };

  const storeFailed = (err: unknown): typeof MISSING => {
    stats.storeErrors++;
    deps.revocation.storeFailed();
    deps.logger.warn(
      { err: (err as Error).message },
      'session store unreachable: reading the session from the database',
    );
    return MISSING;
  };

  /** better-auth's "revoked before" mark of a user (ms; 0 when none), read as better-auth reads it. */
  const readRevokedBefore = async (userId: string): Promise<number> =>
    Number(await deps.store.get(`${AUTH_STORE_PREFIX}revoked-sessions-before-${userId}`));

  /**
   * The store reads for a token: its record and its user's "revoked before" mark. MISSING when the store lost the
   * key or could not be reached (PostgreSQL must answer), null for an unreadable record, otherwise the record with
   * its verdict (context null: expired, banned, or created before the mark).
   *
   * Why the mark: a ban, a password reset or "revoke all sessions" deletes the store records of the sessions on
   * better-auth's per-user list (`active-sessions-<userId>`), which better-auth keeps by read-modify-write, so
   * concurrent sign-ins lose entries (1–5 of 20 sessions survived a ban). It also sets the mark, which better-auth's
   * own session read checks; so does this one. Once the token's user is known, the mark is read in the same turn
   * as the record (one MGET on a single Redis).
   */
  async function readStore(
    token: string,
  ): Promise<typeof MISSING | null | { raw: string; parsed: StoredSession; context: AuthContext | null }> {
    const knownUser = userByToken.get(token);
    const early = knownUser === undefined ? undefined : readRevokedBefore(knownUser);
    // Awaited only when the record is judged; a failure on any other way out must not go unhandled.
    early?.catch(() => undefined);
    let raw: string | null;
    try {
      raw = await deps.store.get(AUTH_STORE_PREFIX + token);
      stats.store++;
    } catch (err) {
      return storeFailed(err);
    }
    if (raw === null) return MISSING;
    const seen = parsedByToken.get(token);
    let parsed: StoredSession;
    if (seen && seen.raw === raw) parsed = seen.parsed;
    else {
      try {
        parsed = JSON.parse(raw) as StoredSession;
      } catch {
        return null;
      }
      if (!parsed?.session || !parsed.user) return null;
      parsedByToken.set(token, { raw, parsed });
    }
    let revokedBefore: number;
    try {
      const userId = parsed.session.userId;
      revokedBefore = await (early && knownUser === userId ? early : readRevokedBefore(userId));
    } catch (err) {
      return storeFailed(err);
    }
    // As better-auth compares: a record without createdAt (NaN) is not "before".
    if (new Date(parsed.session.createdAt ?? Number.NaN).getTime() < revokedBefore) {
      return { raw, parsed, context: null };
    }
    const context = toContext(parsed);
    // The token → user map is written once per record text, not per request.
    return { raw, parsed, context: seen?.raw === raw ? context : remember(token, context) };
  }

  return {
    stats,
    tokenFromHeaders,
    knownUserId: (token) => userByToken.get(token),
    async fromHeaders(input) {
      const token = await tokenFromHeaders(input);
      if (!token || dead.has(token)) return null;
      // After a store failure the store may hold records a revocation could not delete; until every recorded
      // repair has been applied, PostgreSQL (where revocations always land) answers instead.
      if (!deps.revocation.storeTrusted()) return fromDatabase(token);
      const hit = await readStore(token);
      if (hit === MISSING) return fromDatabase(token);
      return hit?.context ?? null;
    },
    async storedSession(token) {
      if (dead.has(token) || !deps.revocation.storeTrusted()) return null;
      const hit = await readStore(token);
      if (hit === MISSING || hit === null || hit.context === null) return null;
      return { raw: hit.raw, parsed: hit.parsed, context: hit.context };
    },
  };
}

declare module 'fastify' {
  interface FastifyRequest {
    auth: AuthContext | null;
  }
}

/** preHandler: 401 without a valid session. */
export function requireUser(resolver: SessionResolver) {
  return async (request: FastifyRequest, _reply: FastifyReply) => {
    request.auth = await resolver.fromHeaders(request.headers);
    if (!request.auth) throw unauthorized();
  };
}

/** preHandler: 401 without a session, 403 for non-admins. */
export function requireAdmin(resolver: SessionResolver) {
  return async (request: FastifyRequest, _reply: FastifyReply) => {
    request.auth = await resolver.fromHeaders(request.headers);
    if (!request.auth) throw unauthorized();
    if (request.auth.user.role !== 'admin') throw forbidden('Administrator role required');
  };
}

/** For handlers behind requireUser/requireAdmin. */
export function authOf(request: FastifyRequest): AuthContext {
  if (!request.auth) throw unauthorized();
  return request.auth;
}
