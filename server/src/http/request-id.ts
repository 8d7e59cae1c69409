// Owns the request id: the one a load balancer or client sent in `X-Request-Id` when it is safe to log, otherwise
// a fresh UUID. Fastify binds it to every `request.log` line (`reqId`); it is echoed on every response, so one
// request can be followed from the load balancer's log through Herald's.
//
// Accepted from anyone (not only from TRUST_PROXY hops): the id is a log correlation key, never an identity, a
// permission or a deduplication key, so a client choosing its own can only label its own requests. The charset and
// length bound keep it from breaking a log line or a header. Behind a proxy that overwrites the header (nginx
// `proxy_set_header X-Request-Id $request_id`, HAProxy `unique-id-header`) the proxy's id is the one kept.
import type { IncomingMessage } from 'node:http';
import { trace } from '@opentelemetry/api';
import type { FastifyInstance } from 'fastify';

export const REQUEST_ID_HEADER = 'x-request-id';
const MAX_LENGTH = 128;
// UUIDs, ULIDs, hex, AWS-style `Root=1-…` and base64url/base64 ids; no spaces, quotes, commas or control bytes.
const SAFE_ID = /^[A-Za-z0-9._~:@+=/-]+$/;

/** The incoming id when it is one header of 1..128 safe characters, otherwise undefined. */
export function safeRequestId(value: string | string[] | undefined): string | undefined {
  // Several X-Request-Id headers: no way to tell which one is the proxy's; generate instead.
  if (typeof value !== 'string') return undefined;
  if (value.length === 0 || value.length > MAX_LENGTH || !SAFE_ID.test(value)) return undefined;
  return value;
}

/** Fastify's genReqId: the safe incoming id, or a new UUID. */
export function genRequestId(req: IncomingMessage): string {
  return safeRequestId(req.headers[REQUEST_ID_HEADER]) ?? crypto.randomUUID();
}

/**
 * Echoes the id on every response. Set among Fastify's reply headers, as the security headers are: the one hijacked
 * response (an SSE stream) copies those into the head it writes. Not on the raw response: one `setHeader` there
 * makes Node route every other header of the response through `setHeader` as well (its header map is created
 * on the first call), which cost the cheapest routes a few µs each (docs/performance.md "Response headers").
 */
export function installRequestIdEcho(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    reply.header(REQUEST_ID_HEADER, request.id);
    // With tracing on, the request's span carries the id its log lines carry (a no-op otherwise).
    trace.getActiveSpan()?.setAttribute('herald.request_id', request.id);
    done();
  });
}
