// Mounts better-auth under /auth: converts Fastify requests to Web Requests and back, fixes the client IP
// header from the socket, and provides the contract's aliases and adapters (forget-password, POST verify-email,
// authoritative get-session, Retry-After on 429).
import { eq } from 'drizzle-orm';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type AppError, httpError, sendError } from '../http/errors.js';
import { nestedDeeperThan, nulError } from '../http/nul-guard.js';
import type { Database } from '../infra/db.js';
import { session as sessionTable } from '../infra/schema/index.js';
import type { Store } from '../infra/store.js';
import { isLastAdminViolation, LAST_ADMIN_MESSAGE } from './account-rules.js';
import {
  type Auth,
  BODY_REFUSED_HEADER,
  type BodyRefusal,
  encodeBodyRefusal,
  MAX_AUTH_BODY_DEPTH,
} from './auth.js';
import type { SessionResolver } from './guard.js';
import type { Revocation } from './revocation.js';
import type { GetSessionFastPath } from './session-read.js';

const ALIASES: Record<string, string> = {
  // Contract name kept for clients written against older better-auth releases.
  '/auth/forget-password': '/auth/request-password-reset',
};

/** Paths an OAuth provider may call with a form-encoded body (response_mode=form_post). */
const FORM_PATHS = /^\/auth\/(callback|oauth2\/callback)\//;

interface Target {
  pathname: string;
  search: URLSearchParams;
  method: 'GET' | 'POST';
  body?: string;
  /** The body was refused (malformed): better-auth counts the request against the route's limit, then answers. */
  refusal?: BodyRefusal;
}

/**
 * What the /auth body parsers hand on instead of a body they refuse (broken JSON, NUL, an unsupported content
 * type): answering from the parser would skip better-auth's rate limit, so a client could send malformed bodies
 * without limit. The handler passes the refusal through better-auth instead (BODY_REFUSED_HEADER).
 */
const REFUSED = Symbol('refusedAuthBody');
interface RefusedBody {
  [REFUSED]: BodyRefusal;
}

function refusedBody(error: AppError): RefusedBody {
  return {
    [REFUSED]: {
      status: error.statusCode,
      body: {
        code: error.code,
        message: error.message,
        ...(error.details ? { details: error.details } : {}),
      },
    },
  };
}

function isRefusedBody(body: unknown): body is RefusedBody {
  return typeof body === 'object' && body !== null && REFUSED in body;
}

function invalidBody(message: string): AppError {
  return httpError('VALIDATION_ERROR', message, { details: [{ path: 'body', message }] });
}

/**
 * Every better-auth route takes a JSON object. Anything else is refused here, counted against the route's limit:
 * better-auth runs its plugins' hooks before the route's schema, and the username plugin's hooks on sign-up/email
 * and update-user read `body.displayUsername`, so a `null` body was a 500 there (other routes' schemas answered
 * 400). A number too large for a double (`1e309`) parses to Infinity, which re-serialises as `null`; a JSON
 * string was handed on unquoted.
 */
const NOT_AN_OBJECT = () => refusedBody(invalidBody('Body must be a JSON object'));

const UNSUPPORTED_TYPE = () =>
  refusedBody(httpError('UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json'));

/** Why a POST's body is refused, or undefined when it may go on to better-auth. */
function bodyRefusal(request: FastifyRequest): BodyRefusal | undefined {
  const body = request.body;
  if (body === undefined) return undefined;
  if (isRefusedBody(body)) return body[REFUSED];
  const type = (request.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type === 'application/x-www-form-urlencoded' && !FORM_PATHS.test(request.url.split('?')[0] ?? '')) {
    return UNSUPPORTED_TYPE()[REFUSED];
  }
  // Re-serialising (or validating) such a body would overflow the stack: a 500 that also skipped the rate limit.
  if (typeof body === 'object' && nestedDeeperThan(body, MAX_AUTH_BODY_DEPTH)) {
    return refusedBody(
      httpError('INVALID_JSON', `Body must be JSON nested at most ${MAX_AUTH_BODY_DEPTH} levels deep`),
    )[REFUSED];
  }
  return undefined;
}

/** Where a refused POST goes: its route (so the route's limit counts it), with an empty body. */
function refusedTarget(request: FastifyRequest, refusal: BodyRefusal): Target {
  const [rawPath = '/', rawSearch = ''] = request.url.split('?', 2) as [string, string?];
  return {
    pathname: ALIASES[rawPath] ?? rawPath,
    search: new URLSearchParams(rawSearch),
    method: 'POST',
    body: '{}',
    refusal,
  };
}

const INTERNAL_HEADERS = new Set(['x-herald-client-ip', BODY_REFUSED_HEADER]);

/** Decides which better-auth route a request goes to, applying the contract's aliases and adapters. */
function resolveTarget(request: FastifyRequest): Target {
  const [rawPath = '/', rawSearch = ''] = request.url.split('?', 2) as [string, string?];
  const pathname = ALIASES[rawPath] ?? rawPath;
  const search = new URLSearchParams(rawSearch);
  const method = request.method as 'GET' | 'POST';

  if (method === 'POST' && pathname === '/auth/verify-email') {
    // better-auth only verifies by GET (a link); the contract also accepts POST { token } from the FE page.
    const body = request.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw invalidBody('Body must be a JSON object { token }');
    }
    const keys = Object.keys(body);
    const token = (body as { token?: unknown }).token;
    if (typeof token !== 'string' || token.length === 0 || token.length > 4096) {
      throw invalidBody('token: expected a non-empty string');
    }
    if (keys.some((k) => k !== 'token' && k !== 'callbackURL')) {
      throw invalidBody(
        `Unknown keys: ${keys.filter((k) => k !== 'token' && k !== 'callbackURL').join(', ')}`,
      );
    }
    search.set('token', token);
    return { pathname, search, method: 'GET' };
  }
  if (pathname === '/auth/get-session') {
    // Always consult the session store: a revoked session must disappear here as on every other route. The
    // response still re-issues the 15-minute signed snapshot cookie (better-auth's cookie cache).
    search.set('disableCookieCache', 'true');
  }
  let body: string | undefined;
  if (method === 'POST') {
    // A POST without a body reaches better-auth as `{}`: some of its handlers assume a parsed object and would
    // otherwise crash (500) instead of answering a validation error.
    body =
      request.body === undefined || request.body === null
        ? '{}'
        : typeof request.body === 'string'
          ? request.body
          : JSON.stringify(request.body);
  }
  return { pathname, search, method, body };
}

/**
 * Drops better-auth's signed session snapshot (the 15-minute cookie cache) from what better-auth sees, so its
 * own authorisation (admin routes, sign-out, list-sessions, …) always reads the live session from the store and
 * a revoked or demoted session can never act on a cached copy. The snapshot is still issued for clients.
 */
function withoutSnapshotCookie(header: string): string {
  return header
    .split(';')
    .filter((part) => !/^\s*(__Secure-)?better-auth\.session_data(\.\d+)?=/.test(part))
    .join(';')
    .trim();
}

function toWebRequest(request: FastifyRequest, target: Target, baseUrl: string): Request {
  const query = target.search.toString();
  // Path and query only, set on the configured base: an absolute-form request target (`GET http://evil/auth/…`)
  // or a `//host` path must never choose the origin better-auth sees.
  const url = new URL(baseUrl);
  url.pathname = target.pathname;
  url.search = query;
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || INTERNAL_HEADERS.has(name)) continue;
    if (name === 'cookie') {
      const cookie = withoutSnapshotCookie(Array.isArray(value) ? value.join('; ') : String(value));
      if (cookie) headers.set('cookie', cookie);
      continue;
    }
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, String(value));
  }
  // request.ip is the socket address unless TRUST_PROXY is configured on the Fastify instance.
  headers.set('x-herald-client-ip', request.ip);
  if (target.refusal) headers.set(BODY_REFUSED_HEADER, encodeBodyRefusal(target.refusal));
  headers.delete('content-length');
  headers.delete('transfer-encoding');
  if (target.body === undefined) headers.delete('content-type');
  else if (!headers.has('content-type')) headers.set('content-type', 'application/json');
  return new Request(url, { method: target.method, headers, body: target.body });
}

async function sendWebResponse(reply: FastifyReply, response: Response) {
  reply.code(response.status);
  response.headers.forEach((value, name) => {
    if (name === 'set-cookie' || name === 'content-length') return;
    reply.header(name, value);
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) reply.header('set-cookie', cookies);
  if (response.status === 429) {
    // better-auth only sets X-Retry-After; the contract (and HTTP) want the standard header too.
    const retryAfter = response.headers.get('x-retry-after');
    reply.header('retry-after', retryAfter && /^\d+$/.test(retryAfter) ? retryAfter : '60');
  }
  const text = response.body ? await response.text() : '';
  return reply.send(text);
}

export interface AuthBridgeDeps {
  auth: Auth;
  /** API_BASE_URL: better-auth resolves its routes against it. */
  baseUrl: string;
  database: Database;
  store: Store;
  sessions: SessionResolver;
  revocation: Revocation;
  /** The get-session fast path (auth/session-read.ts); without it every read goes to better-auth. */
  getSession?: GetSessionFastPath;
}

export function registerAuthBridge(app: FastifyInstance, deps: AuthBridgeDeps): void {
  const { auth, baseUrl } = deps;
  const { getSession } = deps;
  app.register(async (scope) => {
    // OAuth providers may post form-encoded callbacks; better-auth parses the raw text itself.
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string' },
      (_req, body, done) => done(null, body),
    );
    // better-auth's clients POST some routes (sign-out) with a JSON content type and no body; treat an empty
    // JSON body as absent instead of answering INVALID_JSON. Broken JSON (400 INVALID_JSON), NUL (400
    // VALIDATION_ERROR), a body that is not a JSON object (400 VALIDATION_ERROR) and any other content type (415)
    // are refused through better-auth, so they count against the route's rate limit (bodyRefusal above).
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
      const text = typeof body === 'string' ? body : body.toString('utf8');
      if (text.trim() === '') return done(null, undefined);
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        done(null, refusedBody(httpError('INVALID_JSON', 'Body must be valid JSON')));
        return;
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
        done(null, NOT_AN_OBJECT());
        return;
      }
      const nul = nulError(parsed);
      done(null, nul ? refusedBody(nul) : parsed);
    });
    scope.addContentTypeParser('*', { parseAs: 'string' }, (_req, _body, done) =>
      done(null, UNSUPPORTED_TYPE()),
    );
    scope.route({
      method: ['GET', 'POST'],
      url: '/auth/*',
      schema: { hide: true },
      handler: async (request, reply) => {
        // The session read front ends poll: answered from the guard's caches when that gives better-auth's exact
        // answer (auth/session-read.ts); a query string (disableCookieCache, disableRefresh, …) always goes on.
        if (getSession && request.method === 'GET' && request.url === '/auth/get-session') {
          const fast = await getSession.answer(request.headers).catch((err: unknown) => {
            request.log.warn({ err }, 'get-session fast path failed; asking better-auth');
            return null;
          });
          if (fast) {
            reply.code(200);
            for (const [name, value] of fast.headers) reply.header(name, value);
            return reply.send(fast.body);
          }
        }
        const refusal = request.method === 'POST' ? bodyRefusal(request) : undefined;
        const target = refusal ? refusedTarget(request, refusal) : resolveTarget(request);
        const { revocation, sessions, database } = deps;
        const unavailable = () =>
          sendError(reply, 503, { code: 'UNAVAILABLE', message: 'Temporarily unavailable, retry shortly' });
        let response: Response;
        try {
          const run = await revocation.runScoped(() => auth.handler(toWebRequest(request, target, baseUrl)));
          response = run.result;
          // Everything the request changed in PostgreSQL is committed now: bump the revocation markers of the
          // users it touched, so live connections elsewhere re-check them (or record that for later).
          await revocation.commit(run.scope);
          if (run.scope.failed) {
            request.log.error(
              { path: target.pathname },
              'revocation could not be made durable; answering 503',
            );
            return unavailable();
          }
          if (target.pathname === '/auth/sign-out' && response.status < 300) {
            // better-auth answers success even when it could not delete the session (it logs and carries on):
            // check the outcome where it counts. A row still present (or no way to tell) is not a sign-out.
            const token = await sessions.tokenFromHeaders(request.headers);
            if (token) {
              const left = await database.db
                .select({ id: sessionTable.id })
                .from(sessionTable)
                .where(eq(sessionTable.token, token))
                .limit(1)
                .catch(() => null);
              if (left === null || left.length > 0) {
                request.log.error('sign-out did not remove the session; answering 503');
                return unavailable();
              }
            }
          }
        } catch (err) {
          // Two admins demoting or banning each other at once: the database refused the one that would have
          // left no active administrator (the race the LAST_ADMIN pre-check cannot see). Same answer as the check.
          if (isLastAdminViolation(err)) {
            return sendError(reply, 400, { code: 'LAST_ADMIN', message: LAST_ADMIN_MESSAGE });
          }
          if (!deps.store.isReady()) {
            request.log.warn(
              { err, path: target.pathname },
              'auth route failed while the store is unreachable',
            );
            return unavailable();
          }
          throw err;
        }
        if (response.status >= 500) {
          // better-auth answers some malformed input with a 500; keep internals out of the body either way.
          request.log.error({ status: response.status, path: target.pathname }, 'auth route failed');
        }
        return sendWebResponse(reply, response);
      },
    });
  });
}
