// Owns two cross-site request rules for Herald's own routes (everything outside /auth, where better-auth applies
// its own): bodies must be JSON (415 otherwise), so a cross-site "simple" request (text/plain, form) can never
// reach a handler; and a state-changing request that carries the session cookie must come from an allowed
// origin, judged by Origin or, failing that, Sec-Fetch-Site (403 FORBIDDEN otherwise). Requests with neither
// header (curl, server-to-server) are not browser requests and pass.
import type { FastifyInstance } from 'fastify';
import { forbidden } from './errors.js';

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
// better-auth's session cookie, with or without the __Secure- prefix it uses on https.
const SESSION_COOKIE = /(?:^|;\s*)(?:__Secure-)?better-auth\.session_token=/;

const isAuthRoute = (url: string) => url === '/auth' || url.startsWith('/auth/') || url.startsWith('/auth?');
// RFC 8058 one-click unsubscribe (email/routes.ts): authorised by its signed token alone, never by a cookie, so a
// cookie the browser happens to send grants nothing and the origin rule has nothing to protect.
const isUnsubscribe = (url: string) =>
  url === '/notification/unsubscribe' || url.startsWith('/notification/unsubscribe?');

export function installRequestGuards(app: FastifyInstance, opts: { allowedOrigins: string[] }): void {
  const allowed = new Set(opts.allowedOrigins);
  // Fastify parses text/plain by default; without a parser, any non-JSON body is answered 415
  // UNSUPPORTED_MEDIA_TYPE (http/errors.ts) before routing reaches a handler. The /auth bridge registers the
  // form parser it needs for OAuth callbacks in its own scope, and so does the one-click unsubscribe route.
  app.removeContentTypeParser('text/plain');

  // A callback hook: reads (every GET) pass without a promise and a microtask.
  app.addHook('onRequest', (request, _reply, done) => {
    if (!MUTATING.has(request.method) || isAuthRoute(request.url) || isUnsubscribe(request.url))
      return done();
    const cookie = request.headers.cookie;
    if (!cookie || !SESSION_COOKIE.test(cookie)) return done();
    const origin = request.headers.origin;
    if (origin !== undefined) return done(allowed.has(origin) ? undefined : crossSite());
    // Browsers that omit Origin still say where the request came from.
    done(request.headers['sec-fetch-site'] === 'cross-site' ? crossSite() : undefined);
  });
}

const crossSite = () =>
  forbidden('Cross-site requests with a session cookie are not allowed from this origin');
