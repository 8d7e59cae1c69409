// The root's HTTP front door: the Fastify instance with its server options, and the request-level plugins every
// route sits behind, in the order a request meets them (request id, shutdown drain, per-client limits, the
// instance-wide overload guard, cache policy, NUL guard, origin checks, per-IP connection caps). Split out of
// app.ts so the composition root reads as the wiring diagram (docs/architecture.md, "Composition root").
import cors from '@fastify/cors';
import Fastify, { type FastifyInstance, LogController } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { SessionResolver } from '../auth/guard.js';
import { type Config, parseTrustProxy } from '../config.js';
import { installCachePolicy } from '../http/cache.js';
import { type ClientIdentity, type ClientLimits, installClientLimits } from '../http/client-limits.js';
import { installConnectionLimits } from '../http/connection-limits.js';
import { installRequestDrain, type RequestDrain } from '../http/drain.js';
import {
  clientErrorHandler,
  frameworkErrorHandler,
  httpError,
  installErrorHandling,
} from '../http/errors.js';
import { installNulGuard } from '../http/nul-guard.js';
import { createOverloadMonitor, installOverloadGuard, type OverloadMonitor } from '../http/overload.js';
import { trustFunction } from '../http/proxy.js';
import { installRequestGuards } from '../http/request-guards.js';
import { genRequestId, installRequestIdEcho } from '../http/request-id.js';
import { installSecurityHeaders } from '../http/security-headers.js';
import { loggerOptions } from '../infra/logger.js';
import type { Store } from '../infra/store.js';

export interface FrontDoorOptions {
  prettyLogs?: boolean;
  logStream?: { write(line: string): void };
}

/**
 * What the front door needs from parts built after it: the per-client limits read the store and the session
 * resolver, the overload monitor the database pool's queue. Only called once requests flow (after buildApp
 * has set them), so the front door can be installed first, before anything else hooks into requests.
 */
export interface LateParts {
  store(): Pick<Store, 'isReady' | 'incrWindow'>;
  sessions(): SessionResolver | undefined;
  dbWaiting(): number;
}

export interface FrontDoor {
  app: FastifyInstance;
  drain: RequestDrain;
  overload: OverloadMonitor;
  clientLimits: ClientLimits;
}

/** GET paths polled by clients and load balancers; their access log is off unless ACCESS_LOG_POLLED_ROUTES. */
const POLLED_READS = new Set([
  '/health',
  // better-auth's client calls it on load, on focus and on an interval.
  '/auth/get-session',
  '/notification/unread-count',
  '/notification/counts',
  '/notification/list',
]);

function isPolledRead(request: { method?: string; url?: string }): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false;
  const url = request.url ?? '';
  const q = url.indexOf('?');
  return POLLED_READS.has(q < 0 ? url : url.slice(0, q));
}

function createFastify(config: Config, options: FrontDoorOptions): FastifyInstance {
  const app = Fastify({
    logger: {
      ...loggerOptions(config.LOG_LEVEL, options.prettyLogs ?? false),
      ...(options.logStream ? { stream: options.logStream } : {}),
    },
    bodyLimit: config.BODY_LIMIT_BYTES,
    // A client that sends headers and then stalls (or trickles) the body gets 408 and the connection is closed;
    // these bound receiving a request only, never a response, so SSE streams and WebSockets are unaffected.
    requestTimeout: config.HTTP_REQUEST_TIMEOUT_MS,
    keepAliveTimeout: config.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    http: {
      headersTimeout: config.HTTP_HEADERS_TIMEOUT_MS,
      // Node checks those timeouts on this interval (default 30 s); keep it well under the shortest one.
      connectionsCheckingInterval: Math.min(
        30_000,
        Math.max(
          50,
          Math.floor(Math.min(config.HTTP_HEADERS_TIMEOUT_MS, config.HTTP_REQUEST_TIMEOUT_MS) / 4),
        ),
      ),
    },
    trustProxy: parseTrustProxy(config.TRUST_PROXY),
    // The incoming X-Request-Id when safe, else a UUID (http/request-id.ts); read there, not by Fastify's own
    // requestIdHeader, which would take any value.
    genReqId: genRequestId,
    requestIdHeader: false,
    // Fastify's own access log writes two lines per request ("incoming request", "request completed"); Herald
    // writes one (installAccessLog), so any request, malformed ones included, costs one line (CONTRACT §8).
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: false,
    forceCloseConnections: true,
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  return app;
}

/**
 * The access log: one line per answered request ("request completed", with the request's method, safe URL and
 * address, its status and time), off under NODE_ENV=test and, unless ACCESS_LOG_POLLED_ROUTES, for the polled
 * reads. Errors are logged by the error handler either way.
 */
function installAccessLog(app: FastifyInstance, config: Config): void {
  if (config.NODE_ENV === 'test') return;
  const all = config.ACCESS_LOG_POLLED_ROUTES;
  app.addHook('onResponse', (request, reply, done) => {
    if (all || !isPolledRead(request)) {
      request.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
    }
    done();
  });
}

export function createFrontDoor(config: Config, options: FrontDoorOptions, late: LateParts): FrontDoor {
  const app = createFastify(config, options);
  installErrorHandling(app);
  installAccessLog(app, config);
  // First hook: every response, refused ones included, carries the id its log lines carry.
  installRequestIdEcho(app);
  // Before any other request hook, so every request the instance accepts is counted for the shutdown drain.
  const drain = installRequestDrain(app, { graceMs: config.SHUTDOWN_GRACE_MS, logger: app.log });
  const overload = createOverloadMonitor({
    maxEventLoopDelayMs: config.OVERLOAD_MAX_EVENT_LOOP_DELAY_MS,
    maxEventLoopUtilization: config.OVERLOAD_MAX_EVENT_LOOP_UTILIZATION_PCT / 100,
    maxHeapUsedBytes: config.OVERLOAD_MAX_HEAP_USED_BYTES,
    maxDbWaiting: config.OVERLOAD_MAX_DB_WAITING,
    dbWaiting: () => late.dbWaiting(),
    sampleIntervalMs: config.OVERLOAD_SAMPLE_INTERVAL_MS,
    logger: app.log,
  });
  app.addHook('onReady', (done) => {
    overload.rebase();
    done();
  });
  app.addHook('onClose', async () => overload.close());
  // First, per client: one user, key or address over its share gets 429 before its load can trip the
  // instance-wide guard for everyone (issue 22).
  const clientLimits = installClientLimits(app, {
    maxInFlight: config.CLIENT_MAX_IN_FLIGHT,
    maxInFlightPerIp: config.CLIENT_MAX_IN_FLIGHT_PER_IP,
    maxPerSecond: config.CLIENT_RATE_LIMIT_PER_SECOND,
    maxPerSecondPerIp: config.CLIENT_RATE_LIMIT_PER_SECOND_PER_IP,
    store: { isReady: () => late.store().isReady(), incrWindow: (k, w) => late.store().incrWindow(k, w) },
    storeTimeoutMs: config.CACHE_COMMAND_TIMEOUT_MS,
    logger: app.log,
    principal: async (headers): Promise<ClientIdentity | null> => {
      const resolver = late.sessions();
      const token = resolver ? await resolver.tokenFromHeaders(headers) : null;
      if (!token || !resolver) return null;
      // Known after this instance resolved the token once; the first request of a session pays one store read
      // here (the route's own check then reuses the parse). A dead session counts as anonymous (address only).
      const userId = resolver.knownUserId(token) ?? (await resolver.fromHeaders(headers))?.user.id;
      return userId ? { kind: 'user', key: userId, label: { userId } } : null;
    },
  });
  app.addHook('onClose', async () => clientLimits.close());
  // Right after the per-client limits: a refused request costs nothing else.
  installOverloadGuard(app, overload, config.OVERLOAD_RETRY_AFTER_S);
  installCachePolicy(app);
  installNulGuard(app);
  // The same origins better-auth trusts (config.trustedOrigins).
  installRequestGuards(app, { allowedOrigins: config.trustedOrigins });
  const trusted = trustFunction(config.TRUST_PROXY);
  installConnectionLimits(app.server, {
    maxPerIp: config.HTTP_MAX_CONNECTIONS_PER_IP,
    logger: app.log,
    // Hop 0: is the peer itself a trusted proxy (TRUST_PROXY=true trusts every peer, so nothing is capped).
    trustedProxy: config.TRUST_PROXY === undefined ? undefined : (address) => trusted(address, 0),
  });
  return { app, drain, overload, clientLimits };
}

/** Response headers every answer carries, and CORS for the allowlisted origins (credentials included). */
export async function installBrowserPolicy(app: FastifyInstance, config: Config): Promise<void> {
  installSecurityHeaders(app);
  // @fastify/cors answers a preflight without Origin or Access-Control-Request-Method with a text/plain 400; the
  // contract's error body instead (found by fuzzing). Registered first, so it runs before the plugin's hook.
  app.addHook('onRequest', (request, _reply, done) => {
    if (
      request.method === 'OPTIONS' &&
      (!request.headers.origin || !request.headers['access-control-request-method'])
    ) {
      done(
        httpError(
          'INVALID_REQUEST',
          'A preflight request needs the Origin and Access-Control-Request-Method headers',
        ),
      );
      return;
    }
    done();
  });
  await app.register(cors, {
    origin: (origin, cb) => cb(null, origin === undefined || config.corsOrigins.includes(origin)),
    credentials: true,
    methods: ['GET', 'POST', 'PATCH', 'PUT', 'DELETE', 'OPTIONS'],
    maxAge: 600,
  });
}
