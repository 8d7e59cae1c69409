// Owns request authentication for Herald's own routes (notifications, chat, admin, metrics).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { forbidden, unauthorized } from '../http/errors.js';
import type { Auth } from './auth.js';

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
}

function toHeaders(input: Headers | Record<string, string | string[] | undefined>): Headers {
  if (input instanceof Headers) return input;
  const headers = new Headers();
  for (const [k, v] of Object.entries(input)) {
    if (v === undefined) continue;
    headers.set(k, Array.isArray(v) ? v.join(', ') : v);
  }
  return headers;
}

export function createSessionResolver(auth: Auth): SessionResolver {
  return {
    async fromHeaders(input) {
      // disableCookieCache: our routes always consult the session store so that revocation is immediate.
      const result = await auth.api.getSession({
        headers: toHeaders(input),
        query: { disableCookieCache: true },
      });
      if (!result) return null;
      const u = result.user as typeof result.user & { role?: string | null; banned?: boolean | null };
      if (u.banned) return null;
      return {
        user: {
          id: u.id,
          email: u.email,
          name: u.name,
          image: u.image ?? null,
          emailVerified: u.emailVerified,
          role: u.role ?? 'user',
          banned: Boolean(u.banned),
        },
        session: {
          id: result.session.id,
          token: result.session.token,
          userId: result.session.userId,
          expiresAt: new Date(result.session.expiresAt),
        },
      };
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
