// Mounts better-auth under /auth: converts Fastify requests to Web Requests and back, fixes the client IP
// header from the socket, and provides the contract's aliases.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Auth } from './auth.js';

const ALIASES: Record<string, string> = {
  // Contract name kept for clients written against older better-auth releases.
  '/auth/forget-password': '/auth/request-password-reset',
};

function toWebRequest(request: FastifyRequest, baseUrl: string): Request {
  const [pathname = '/', search = ''] = request.url.split('?', 2) as [string, string?];
  const target = ALIASES[pathname] ?? pathname;
  const url = new URL(`${target}${search ? `?${search}` : ''}`, baseUrl);
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || name === 'x-herald-client-ip') continue;
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, String(value));
  }
  // request.ip is the socket address unless TRUST_PROXY is configured on the Fastify instance.
  headers.set('x-herald-client-ip', request.ip);
  let body: string | undefined;
  if (request.method !== 'GET' && request.method !== 'HEAD' && request.body !== undefined) {
    body = typeof request.body === 'string' ? request.body : JSON.stringify(request.body);
  }
  if (body !== undefined) headers.delete('content-length');
  return new Request(url, { method: request.method, headers, body });
}

export function registerAuthBridge(app: FastifyInstance, auth: Auth, baseUrl: string): void {
  app.register(async (scope) => {
    // OAuth providers may post form-encoded callbacks; better-auth parses the raw text itself.
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string' },
      (_req, body, done) => done(null, body),
    );
    scope.route({
      method: ['GET', 'POST'],
      url: '/auth/*',
      schema: { hide: true },
      handler: async (request, reply) => {
        const response = await auth.handler(toWebRequest(request, baseUrl));
        reply.code(response.status);
        response.headers.forEach((value, name) => {
          if (name === 'set-cookie') return;
          reply.header(name, value);
        });
        const cookies = response.headers.getSetCookie();
        if (cookies.length > 0) reply.header('set-cookie', cookies);
        const text = response.body ? await response.text() : '';
        return reply.send(text);
      },
    });
  });
}
