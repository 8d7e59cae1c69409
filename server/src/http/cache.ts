// Owns HTTP caching rules for Herald's own routes: authenticated responses are never stored by shared or
// browser caches, and small polled resources answer conditional requests (ETag / If-None-Match → 304).
import { hash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Cache-Control: no-store on every response to an authenticated request that did not set its own policy. */
export function installCachePolicy(app: FastifyInstance): void {
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.auth && !reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    done(null, payload);
  });
}

/** Weak validator of a JSON body: equal bodies, equal tags. */
export function etagOf(body: unknown): string {
  // One-shot hash: no Hash object per polled request.
  return `W/"${hash('sha256', JSON.stringify(body), 'base64url').slice(0, 27)}"`;
}

/**
 * Sets the ETag of `body` and reports whether the client already has it (If-None-Match), in which case the
 * caller answers 304 with no body. Still `no-store`: the tag is for the client's own revalidation.
 */
export function notModified(request: FastifyRequest, reply: FastifyReply, body: unknown): boolean {
  const tag = etagOf(body);
  reply.header('etag', tag);
  const given = request.headers['if-none-match'];
  if (typeof given !== 'string') return false;
  return given.split(',').some((t) => t.trim() === tag || t.trim() === '*');
}
