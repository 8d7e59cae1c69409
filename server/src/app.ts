// Composition root, in fixed order: infra → realtime → auth → features → ops. Builds one independent app per
// call so tests can run several in one process.
import cors from '@fastify/cors';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyInstance, LogController } from 'fastify';
import {
  jsonSchemaTransform,
  jsonSchemaTransformObject,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import { registerAdmin } from './admin/index.js';
import { registerApiKeys } from './api-keys/index.js';
import { createAuth } from './auth/auth.js';
import { registerAuthBridge } from './auth/bridge.js';
import { createSessionResolver } from './auth/guard.js';
import { describeAuthRoutes } from './auth/openapi.js';
import { createRevocation } from './auth/revocation.js';
import { createGetSessionFastPath } from './auth/session-read.js';
import { registerChat } from './chat/index.js';
import { type Config, parseTrustProxy } from './config.js';
import type { AppContext } from './context.js';
import { createEmail, createEmailRendererFromConfig, registerEmail } from './email/index.js';
import { emailOutcomeEvent } from './events/email.js';
import { createEventOutbox } from './events/outbox.js';
import { installCachePolicy } from './http/cache.js';
import { type ClientIdentity, installClientLimits } from './http/client-limits.js';
import { installConnectionLimits } from './http/connection-limits.js';
import { installRequestDrain } from './http/drain.js';
import { clientErrorHandler, frameworkErrorHandler, installErrorHandling } from './http/errors.js';
import { installNulGuard } from './http/nul-guard.js';
import {
  finishOpenApiDocument,
  HERALD_LOGO_SVG,
  type OpenApiDocument,
  securitySchemes,
} from './http/openapi.js';
import { createOverloadMonitor, installOverloadGuard } from './http/overload.js';
import { trustFunction } from './http/proxy.js';
import { installRequestGuards } from './http/request-guards.js';
import { genRequestId, installRequestIdEcho } from './http/request-id.js';
import { docsContentSecurityPolicy, installSecurityHeaders } from './http/security-headers.js';
import { registerClientConfig, registerWebApp } from './http/web-app.js';
import { createDatabase } from './infra/db.js';
import { createEmailOutbox } from './infra/email-outbox.js';
import { canPrettyPrint, loggerOptions } from './infra/logger.js';
import { checkSmtp, createMailer } from './infra/mailer.js';
import { createStore } from './infra/store.js';
import { registerNotifications } from './notifications/index.js';
import { registerHealth } from './ops/health.js';
import { createLifecycle } from './ops/lifecycle.js';
import { registerMetrics } from './ops/metrics.js';
import { createHeraldMetrics, installHttpMetrics } from './ops/prometheus.js';
import { createPush, registerPush } from './push/index.js';
import { createRealtime, registerRealtimeTestRoutes } from './realtime/index.js';
import { createWebhooks, registerWebhooks } from './webhooks/index.js';
import { createSender } from './webhooks/sender.js';
import { type Resolver, resolveTarget, systemResolver, UrlRefused } from './webhooks/ssrf.js';

export type { AppContext } from './context.js';

export interface BuildOptions {
  /** Replace infrastructure pieces (tests force failures this way). */
  overrides?: Partial<Pick<AppContext, 'mailer' | 'database' | 'store'>>;
  /** Pretty logs (development entry point only). */
  prettyLogs?: boolean;
  /** Where log lines go instead of stdout (tests read what was logged). */
  logStream?: { write(line: string): void };
  /** Host resolution for webhook targets (a test changes the DNS answer between check and delivery). */
  webhookResolver?: Resolver;
  /** Host resolution for push endpoints (tests answer public-looking names with their own addresses). */
  pushResolver?: Resolver;
}

export type App = FastifyInstance;

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

export async function buildApp(config: Config, options: BuildOptions = {}): Promise<App> {
  // First: a broken email template override stops start-up before a database or store is opened.
  const emailRenderer = createEmailRendererFromConfig(config);
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
    logController: new LogController({
      disableRequestLogging:
        config.NODE_ENV === 'test'
          ? true
          : config.ACCESS_LOG_POLLED_ROUTES
            ? false
            : (request: { method?: string; url?: string }) => isPolledRead(request),
    }),
    return503OnClosing: false,
    forceCloseConnections: true,
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installErrorHandling(app);
  // First hook: every response, refused ones included, carries the id its log lines carry.
  installRequestIdEcho(app);
  // Before any other request hook, so every request the instance accepts is counted for the shutdown drain.
  const drain = installRequestDrain(app, { graceMs: config.SHUTDOWN_GRACE_MS, logger: app.log });
  const overload = createOverloadMonitor({
    maxEventLoopDelayMs: config.OVERLOAD_MAX_EVENT_LOOP_DELAY_MS,
    maxEventLoopUtilization: config.OVERLOAD_MAX_EVENT_LOOP_UTILIZATION_PCT / 100,
    maxHeapUsedBytes: config.OVERLOAD_MAX_HEAP_USED_BYTES,
    maxDbWaiting: config.OVERLOAD_MAX_DB_WAITING,
    dbWaiting: () => database.waiting?.() ?? 0,
    sampleIntervalMs: config.OVERLOAD_SAMPLE_INTERVAL_MS,
    logger: app.log,
  });
  app.addHook('onReady', (done) => {
    overload.rebase();
    done();
  });
  app.addHook('onClose', async () => overload.close());
  // First, per client: one user, key or address over its share gets 429 before its load can trip the
  // instance-wide guard for everyone (issue 22). The session resolver exists only later in this function.
  let resolver: ReturnType<typeof createSessionResolver> | undefined;
  const clientLimits = installClientLimits(app, {
    maxInFlight: config.CLIENT_MAX_IN_FLIGHT,
    maxInFlightPerIp: config.CLIENT_MAX_IN_FLIGHT_PER_IP,
    maxPerSecond: config.CLIENT_RATE_LIMIT_PER_SECOND,
    maxPerSecondPerIp: config.CLIENT_RATE_LIMIT_PER_SECOND_PER_IP,
    // Built below (after the database); only called once requests flow.
    store: { isReady: () => store.isReady(), incrWindow: (k, w) => store.incrWindow(k, w) },
    storeTimeoutMs: config.CACHE_COMMAND_TIMEOUT_MS,
    logger: app.log,
    principal: async (headers): Promise<ClientIdentity | null> => {
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
  const logger = app.log;
  const trusted = trustFunction(config.TRUST_PROXY);
  installConnectionLimits(app.server, {
    maxPerIp: config.HTTP_MAX_CONNECTIONS_PER_IP,
    logger,
    // Hop 0: is the peer itself a trusted proxy (TRUST_PROXY=true trusts every peer, so nothing is capped).
    trustedProxy: config.TRUST_PROXY === undefined ? undefined : (address) => trusted(address, 0),
  });
  if (options.prettyLogs && !canPrettyPrint()) {
    logger.info('pino-pretty is not installed (production install?): logging JSON');
  }
  for (const warning of config.warnings) logger.warn(warning);

  // infra
  const database =
    options.overrides?.database ??
    (await createDatabase({
      databaseUrl: config.DATABASE_URL,
      ...(config.DATABASE_DIRECT_URL ? { directUrl: config.DATABASE_DIRECT_URL } : {}),
      readUrls: config.DATABASE_READ_URL,
      readMaxLagMs: config.DATABASE_READ_MAX_LAG_MS,
      readPollMs: config.DATABASE_READ_POLL_MS,
      poolSize: config.DATABASE_POOL_SIZE,
      dataDir: config.DATA_DIR,
      statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
      applicationName: `herald:${config.INSTANCE_ID}`,
      logger,
    }));
  try {
    await database.migrate();
  } catch (err) {
    // Otherwise the embedded database's lock file would stay held by a process that failed to start.
    if (!options.overrides?.database) await database.close().catch(() => {});
    throw err;
  }
  const store =
    options.overrides?.store ??
    createStore({
      url: config.CACHE_URL,
      cluster: config.CACHE_CLUSTER,
      prefix: config.CACHE_KEY_PREFIX,
      commandTimeoutMs: config.CACHE_COMMAND_TIMEOUT_MS,
      onError: (role, err) => logger.warn({ role, err: err.message }, 'store connection error'),
    });
  if (store.kind === 'memory') {
    logger.warn(
      'CACHE_URL is not set: using the in-process store; distributed mode is off (single instance only)',
    );
  }
  const mailer =
    options.overrides?.mailer ??
    createMailer({
      host: config.SMTP_HOST,
      port: config.SMTP_PORT,
      secure: config.SMTP_SECURE,
      user: config.SMTP_USER,
      pass: config.SMTP_PASSWORD,
      from: config.SMTP_FROM,
      isProduction: config.isProduction,
      logger,
    });
  // Not awaited: a slow or unreachable SMTP server must not delay readiness; the result is only logged.
  void checkSmtp(
    mailer,
    logger,
    { host: config.SMTP_HOST, port: config.SMTP_PORT },
    config.SMTP_VERIFY_TIMEOUT_MS,
  );
  // The event port before its writers (email outbox, auth, notifications, chat) and with its consumers attached.
  const events = createEventOutbox();
  const webhooks = createWebhooks({
    config,
    db: database.db,
    logger,
    ...(options.webhookResolver ? { resolve: options.webhookResolver } : {}),
  });
  events.attach(webhooks.events);

  // Web Push: before the notifications feature, whose delivery runs its strategy.
  // The webhooks' pinned-address sender and SSRF rules serve push endpoints too (one mechanism once).
  const pushResolve = options.pushResolver ?? systemResolver;
  const push = createPush({
    config,
    db: database.db,
    logger,
    events,
    createSender: () =>
      createSender({
        timeoutMs: config.PUSH_TIMEOUT_MS,
        allowPrivate: config.PUSH_ALLOW_PRIVATE_ENDPOINTS,
        resolve: pushResolve,
      }),
    checkAddress: async (url) => {
      try {
        await resolveTarget(url, { allowPrivate: config.PUSH_ALLOW_PRIVATE_ENDPOINTS, resolve: pushResolve });
        return null;
      } catch (err) {
        if (err instanceof UrlRefused) return err.message;
        throw err;
      }
    },
  });
  const outbox = createEmailOutbox({
    db: database.db,
    mailer,
    logger: logger.child({ component: 'email-outbox' }),
    pollMs: config.EMAIL_QUEUE_POLL_MS,
    maxAttempts: config.EMAIL_MAX_ATTEMPTS,
    retryBaseMs: config.EMAIL_RETRY_BASE_MS,
    onOutcome: (tx, outcome) => events.write(tx, [emailOutcomeEvent(outcome)]).then(() => undefined),
  });
  const lifecycle = createLifecycle({
    logger,
    timeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    graceMs: config.SHUTDOWN_GRACE_MS,
    drainMs: config.SHUTDOWN_DRAIN_MS,
  });
  lifecycle.onShutdown('drain-requests', 'http-requests', async () => {
    const { finished, cutShort } = await drain.drain();
    if (finished + cutShort > 0) logger.info({ finished, cutShort }, 'in-flight requests drained');
  });

  const metrics = createHeraldMetrics(config.INSTANCE_ID);
  installHttpMetrics(app, metrics);

  // realtime
  const realtime = createRealtime({
    config,
    store,
    logger,
    onBusLatencySeconds: (seconds) => metrics.busLatency.observe(seconds),
  });
  await realtime.start();
  lifecycle.onShutdown('remove-presence', 'presence', () => realtime.removePresence());
  lifecycle.onShutdown('deregister', 'registry', () => realtime.deregister());
  // Phases up to close-connections run while the server still answers (health says 503); the rest once
  // Fastify has stopped the HTTP server. Added before the features so this preClose hook runs first.
  const onStepError = (name: string, err: unknown) =>
    logger.error({ step: name, err }, 'shutdown step failed');
  app.addHook('preClose', async () => {
    await lifecycle.runThrough('close-connections', onStepError);
  });

  // auth
  const revocation = createRevocation({ store, db: database.db, logger });
  // The store was unreachable: revocations meanwhile may have left stale records there (or lost their bus
  // messages). Stop trusting it until the pending repairs are applied, which starts as soon as it is back.
  realtime.onDegraded(() => revocation.storeFailed());
  realtime.onRecovered(() => {
    void revocation.drain();
  });
  const email = createEmail({ config, db: database.db, outbox, logger, renderer: emailRenderer });
  const auth = createAuth({
    config,
    db: database.db,
    store,
    outbox,
    emails: emailRenderer,
    logger,
    realtime,
    revocation,
    events,
  });
  const sessions = createSessionResolver(auth, { store, db: database.db, logger, revocation });
  resolver = sessions;
  const sessionRead = createGetSessionFastPath(auth, { sessions, store });

  app.decorate('ctx', {
    config,
    logger,
    database,
    store,
    mailer,
    outbox,
    email,
    realtime,
    auth,
    sessions,
    sessionRead,
    revocation,
    lifecycle,
    metrics,
    overload,
    events,
    drain,
    clientLimits,
    webhooks,
    push,
  });
  app.decorateRequest('auth', null);

  installSecurityHeaders(app);
  await app.register(cors, {
    origin: (origin, cb) => cb(null, origin === undefined || config.corsOrigins.includes(origin)),
    credentials: true,
    methods: ['GET', 'POST', 'PATCH', 'PUT', 'DELETE', 'OPTIONS'],
    maxAge: 600,
  });
  const authOpenApi = await describeAuthRoutes(auth);
  const sessionCookieName = (await auth.$context).authCookies.sessionToken.name;
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Herald API',
        version: '0.1.0',
        description:
          'Accounts, notifications (JSON and Server-Sent Events) and chat. Sign in through `/auth/*` to get the ' +
          'session cookie the other routes take; browser-style cookie requests that change state must also send ' +
          'an allowed `Origin`.',
      },
      servers: [{ url: config.API_BASE_URL }],
      components: { securitySchemes: securitySchemes(sessionCookieName) },
    },
    transform: jsonSchemaTransform,
    // Herald's own routes come from their Zod schemas (plus the schemas registered by id, e.g. ChatMessage);
    // /auth/* from better-auth's generator (the bridge route itself is hidden).
    transformObject: (document) => {
      if (!('openapiObject' in document)) return document.swaggerObject;
      const withRegistry = jsonSchemaTransformObject(document) as OpenApiDocument;
      return finishOpenApiDocument(withRegistry, authOpenApi) as typeof document.openapiObject;
    },
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: docsContentSecurityPolicy(config.API_BASE_URL.startsWith('https:')),
    theme: { title: 'Herald API' },
    logo: { type: 'image/svg+xml', content: HERALD_LOGO_SVG, href: '/docs' },
    uiConfig: {
      docExpansion: 'list',
      deepLinking: true,
      displayRequestDuration: true,
      tryItOutEnabled: false,
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  registerAuthBridge(app, auth, config.API_BASE_URL, sessionRead);
  // The bundled web app (its onRequest hook answers static files and page navigations before routing does).
  registerWebApp(app);

  // features
  registerNotifications(app);
  registerEmail(app);
  // Before the routes that accept keys (admin broadcast, metrics) use `app.apiKeys`.
  registerApiKeys(app);
  registerAdmin(app);
  registerChat(app);
  await registerWebhooks(app);
  registerPush(app);

  // ops
  registerHealth(app);
  registerMetrics(app);
  registerClientConfig(app);
  // Test-only observation routes of the real-time core (NODE_ENV=test only).
  registerRealtimeTestRoutes(app);

  lifecycle.onShutdown('close-pools', 'revocation', async () => revocation.close());
  outbox.start();
  // Stopped with the other workers, before the pools it writes through close.
  lifecycle.onShutdown('close-connections', 'email-outbox', () => outbox.stop());
  lifecycle.onShutdown('close-pools', 'mailer', () => mailer.close());
  lifecycle.onShutdown('close-pools', 'store', () => store.close());
  lifecycle.onShutdown('close-pools', 'database', () => database.close());
  app.addHook('onClose', async () => {
    await lifecycle.shutdown(onStepError);
  });

  await app.ready();
  return app;
}
