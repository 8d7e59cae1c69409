// Owns Herald's fast path for `GET /auth/get-session` (issue 27): the answer better-auth would give, built from the
// guard's verified-cookie and store caches instead of a per-call better-auth dispatch. Design and safety argument:
// docs/architecture.md "The get-session fast path".
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import type { BetterAuthOptions } from 'better-auth';
import { parseSessionOutput, parseUserOutput } from 'better-auth/db';
import { serializeCookie } from 'better-call';
import { BoundedMap } from '../infra/bounded-map.js';
import type { Auth } from './auth.js';
import { readCookie, type SessionResolver, type StoredSession } from './guard.js';

/** What the fast path answers with: status 200, these headers in this order, and the body. */
export interface GetSessionAnswer {
  headers: [name: string, value: string | string[]][];
  body: string;
}

export interface GetSessionFastPath {
  /**
   * better-auth's exact answer to `GET /auth/get-session` with these request headers, or null when better-auth
   * has to answer itself (no or bad cookie, unknown, revoked, expired or banned session, a session refresh due,
   * an untrusted or unreachable store, a configuration this module does not reproduce).
   */
  answer(headers: Record<string, string | string[] | undefined>): Promise<GetSessionAnswer | null>;
  /** Counters for tests and metrics: answers given here and requests left to better-auth. */
  stats: { fast: number; fallthrough: number };
}

export interface GetSessionFastPathDeps {
  sessions: SessionResolver;
}

/** better-auth's per-chunk ceiling for a cookie (cookies/session-store: MAX_COOKIE_SIZE). */
const MAX_COOKIE_SIZE = 4050;

interface Settings {
  /** The auth secret as a KeyObject: imported once, not by every createHmac (the snapshot is signed per request). */
  secretKey: KeyObject;
  dataCookie: string;
  dontRememberCookie: string;
  /** `; Max-Age=…; Path=/; HttpOnly; …` exactly as better-auth's cookie writer appends to the snapshot cookie. */
  dataCookieSuffix: string;
  /** Longest snapshot value that better-auth writes as one cookie (longer ones are chunked: left to it). */
  maxDataValue: number;
  maxAgeS: number;
  expiresInMs: number;
  updateAgeMs: number;
  options: Parameters<typeof parseUserOutput>[0];
}

/** A stored record rendered once: the body and the JSON of its two halves, reused while the record is unchanged. */
interface Rendered {
  raw: string;
  body: string;
  sessionJson: string;
  userJson: string;
  expiresAtMs: number;
  /** The snapshot cookie's parts that do not depend on the clock, made on the record's first answer. */
  snapshot?: SnapshotParts;
}

/**
 * The snapshot cookie up to its issue time, prepared once per record. The cookie is re-signed and re-encoded on
 * every answer (its `updatedAt` and `expiresAt` move with the clock), but everything before `updatedAt` (the
 * session and user, ~1.4 KB) is the same each time: it is kept as the UTF-8 bytes the signature starts with and
 * as base64url already encoded, so an answer signs and encodes only its last ~100 bytes.
 */
export interface SnapshotParts {
  /** `{"session":<session>,"user":<user>,"updatedAt":` in UTF-8: the signed text before the clock. */
  signedHead: Buffer;
  /** base64url of the cookie's JSON before the clock, for its longest prefix of whole 3-byte groups. */
  valueHead: string;
  /** The 0–2 bytes of that JSON after `valueHead`, encoded per answer together with the rest. */
  valueCarry: Buffer;
}

export function snapshotParts(sessionJson: string, userJson: string): SnapshotParts {
  const head = `"session":${sessionJson},"user":${userJson},"updatedAt":`;
  const value = Buffer.from(`{"session":{${head}`);
  const whole = value.length - (value.length % 3);
  return {
    signedHead: Buffer.from(`{${head}`),
    valueHead: value.subarray(0, whole).toString('base64url'),
    valueCarry: Buffer.from(value.subarray(whole)),
  };
}

/**
 * better-auth's snapshot cookie value (cookies/index setCookieCache, "compact" strategy): base64url of
 * `{ session: { session, user, updatedAt, version }, expiresAt, signature }`, the signature an HMAC-SHA256 of the
 * same object with `expiresAt` folded in, issued at `now`.
 */
export function snapshotValue(parts: SnapshotParts, key: KeyObject, now: number, maxAgeS: number): string {
  const expiresAt = now + maxAgeS * 1000;
  const signature = createHmac('sha256', key)
    .update(parts.signedHead)
    .update(`${now},"version":"1","expiresAt":${expiresAt}}`)
    .digest('base64url');
  const tail = Buffer.from(`${now},"version":"1"},"expiresAt":${expiresAt},"signature":"${signature}"}`);
  return parts.valueHead + Buffer.concat([parts.valueCarry, tail]).toString('base64url');
}

/**
 * A plugin that replaces the get-session endpoint (customSession) or hooks into it could change the answer in
 * ways this module does not know of. None of Herald's does (admin hooks /list-sessions, username /sign-up/email
 * and /update-user); a matcher that cannot be asked counts as touching it.
 */
function pluginsTouchGetSession(options: BetterAuthOptions): boolean {
  const probe = { path: '/get-session', method: 'GET', headers: new Headers(), query: {} };
  return (options.plugins ?? []).some((plugin) => {
    const endpoints = Object.values(plugin.endpoints ?? {}) as { path?: string }[];
    if (endpoints.some((e) => e.path === '/get-session')) return true;
    const hooks = [...(plugin.hooks?.before ?? []), ...(plugin.hooks?.after ?? [])];
    return hooks.some((hook) => {
      try {
        return hook.matcher(probe as Parameters<typeof hook.matcher>[0]);
      } catch {
        return true;
      }
    });
  });
}

/**
 * Reads the better-auth settings the answer depends on, or null when better-auth is configured in a way this
 * module does not reproduce (then every request goes to better-auth, which is always correct).
 */
async function loadSettings(auth: Auth): Promise<Settings | null> {
  const ctx = await auth.$context;
  // Widened to the general option type: the checks below are about what this deployment could be configured with.
  const general: BetterAuthOptions = ctx.options;
  const session = general.session;
  const cache = session?.cookieCache;
  const reproducible =
    cache?.enabled === true &&
    (cache.strategy === undefined || cache.strategy === 'compact') &&
    cache.version === undefined &&
    ctx.sessionConfig.cookieRefreshCache === false &&
    !session?.deferSessionRefresh &&
    !session?.disableSessionRefresh &&
    session?.additionalFields === undefined &&
    !general.account?.storeAccountCookie;
  if (!reproducible || pluginsTouchGetSession(general)) return null;
  const data = ctx.authCookies.sessionData;
  const maxAgeS = data.attributes.maxAge;
  if (typeof maxAgeS !== 'number' || maxAgeS <= 0) return null;
  const prefix = `${data.name}=`;
  const empty = serializeCookie(data.name, '', data.attributes);
  return {
    secretKey: createSecretKey(Buffer.from(ctx.secret, 'utf8')),
    dataCookie: data.name,
    dontRememberCookie: ctx.authCookies.dontRememberToken.name,
    dataCookieSuffix: empty.slice(prefix.length),
    // better-auth sizes chunks against the longest chunk name (`<name>.99`); a value that fits is one cookie.
    maxDataValue: MAX_COOKIE_SIZE - serializeCookie(`${data.name}.99`, '', data.attributes).length,
    maxAgeS,
    expiresInMs: ctx.sessionConfig.expiresIn * 1000,
    updateAgeMs: ctx.sessionConfig.updateAge * 1000,
    options: ctx.options,
  };
}

/** better-auth's own rendering of a stored record (internal adapter findSession, then the get-session route). */
function render(raw: string, stored: StoredSession, options: Settings['options']): Rendered | null {
  const s = stored.session as Record<string, unknown>;
  const u = stored.user as Record<string, unknown>;
  const session = parseSessionOutput(options, {
    ...s,
    expiresAt: new Date(s.expiresAt as string),
    createdAt: new Date(s.createdAt as string),
    updatedAt: new Date(s.updatedAt as string),
  } as Parameters<typeof parseSessionOutput>[1]);
  const user = parseUserOutput(options, {
    ...u,
    createdAt: new Date(u.createdAt as string),
    updatedAt: new Date(u.updatedAt as string),
  } as Parameters<typeof parseUserOutput>[1]);
  const expiresAtMs = new Date(s.expiresAt as string).getTime();
  // An invalid date would make better-auth throw while serialising (toISOString); leave such a record to it.
  const dates = [s.createdAt, s.expiresAt, s.updatedAt, u.createdAt, u.updatedAt];
  if (dates.some((d) => !Number.isFinite(new Date(d as string).getTime()))) return null;
  const sessionJson = JSON.stringify(session);
  const userJson = JSON.stringify(user);
  return {
    raw,
    // JSON.stringify({ session, user }) written out, so the halves are serialised once.
    body: `{"session":${sessionJson},"user":${userJson}}`,
    sessionJson,
    userJson,
    expiresAtMs,
  };
}

function cookieHeader(headers: Record<string, string | string[] | undefined>): string | undefined {
  const v = headers.cookie;
  return Array.isArray(v) ? v.join('; ') : v;
}

export function createGetSessionFastPath(auth: Auth, deps: GetSessionFastPathDeps): GetSessionFastPath {
  const stats = { fast: 0, fallthrough: 0 };
  let settings: Promise<Settings | null> | undefined;
  const rendered = new BoundedMap<Rendered>(10_000);

  /** The snapshot cookie for this record, issued now (snapshotValue), or null when better-auth would chunk it. */
  const snapshotCookie = (r: Rendered, s: Settings): string | null => {
    r.snapshot ??= snapshotParts(r.sessionJson, r.userJson);
    const value = snapshotValue(r.snapshot, s.secretKey, Date.now(), s.maxAgeS);
    if (value.length > s.maxDataValue) return null;
    return `${s.dataCookie}=${value}${s.dataCookieSuffix}`;
  };

  const answer = async (
    headers: Record<string, string | string[] | undefined>,
  ): Promise<GetSessionAnswer | null> => {
    settings ??= loadSettings(auth);
    const s = await settings;
    if (!s) return null;
    const cookie = cookieHeader(headers);
    // "Remember me" off: better-auth issues session-lifetime cookies and skips the sliding refresh. Rare; its own.
    if (!cookie || readCookie(cookie, s.dontRememberCookie) !== undefined) return null;
    const token = await deps.sessions.tokenFromHeaders(headers);
    if (!token) return null;
    // The guard's read also refuses a session created before the user's "revoked before" mark, as better-auth
    // does (auth/guard.ts readStore).
    const hit = await deps.sessions.storedSession(token);
    if (!hit) return null;
    let r = rendered.get(token);
    if (!r || r.raw !== hit.raw) {
      const fresh = render(hit.raw, hit.parsed, s.options);
      if (!fresh) return null;
      r = fresh;
      rendered.set(token, r);
    }
    const now = Date.now();
    // Expired (the guard checked too, but the clock moved), or the once-a-day sliding refresh is due: that writes
    // the session and re-issues the token cookie, which better-auth does itself.
    if (r.expiresAtMs < now || r.expiresAtMs - s.expiresInMs + s.updateAgeMs <= now) return null;
    const setCookie = snapshotCookie(r, s);
    if (!setCookie) return null;
    return {
      headers: [
        ['cache-control', 'no-store'],
        ['content-type', 'application/json'],
        ['pragma', 'no-cache'],
        ['set-cookie', [setCookie]],
      ],
      body: r.body,
    };
  };

  return {
    stats,
    async answer(headers) {
      const result = await answer(headers);
      if (result) stats.fast++;
      else stats.fallthrough++;
      return result;
    },
  };
}
