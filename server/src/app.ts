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
import { registerChat } from './chat/index.js';
import type { Config } from './config.js';
import type { AppContext } from './context.js';
import { installCachePolicy } from './http/cache.js';
import { installConnectionLimits } from './http/connection-limits.js';
import { clientErrorHandler, frameworkErrorHandler, installErrorHandling } from './http/errors.js';
import { installNulGuard } from './http/nul-guard.js';
import {
  finishOpenApiDocument,
  HERALD_LOGO_SVG,
  type OpenApiDocument,
  securitySchemes,
} from './http/openapi.js';
import { createOverloadMonitor, installOverloadGuard } from './http/overload.js';
import { parseTrustProxy } from './http/proxy.js';
import { installRequestGuards } from './http/request-guards.js';
import { installSecurityHeaders } from './http/security-headers.js';
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
import { createRealtime, registerRealtimeTestRoutes } from './realtime/index.js';
import { createWebhooks, registerWebhooks } from './webhooks/index.js';
import type { Resolver } from './webhooks/ssrf.js';

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
}

export type App = FastifyInstance;

/** GET paths polled by clients and load balancers; their access log is off unless ACCESS_LOG_POLLED_ROUTES. */
const POLLED_READS = new Set([
  '/health',
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
    genReqId: () => crypto.randomUUID(),
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
  // Right after the request id: a refused request costs nothing else.
  installOverloadGuard(app, overload, config.OVERLOAD_RETRY_AFTER_S);
  installCachePolicy(app);
  installNulGuard(app);
  // The same origins better-auth trusts (config.trustedOrigins).
  installRequestGuards(app, { allowedOrigins: config.trustedOrigins });
  const logger = app.log;
  installConnectionLimits(app.server, { maxPerIp: config.HTTP_MAX_CONNECTIONS_PER_IP, logger });
  if (options.prettyLogs && !canPrettyPrint()) {
    logger.info('pino-pretty is not installed (production install?): logging JSON');
  }
  for (const warning of config.warnings) logger.warn(warning);

  // infra
  const database =
    options.overrides?.database ??
    createDatabase({
      databaseUrl: config.DATABASE_URL,
      dataDir: config.DATA_DIR,
      statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
      logger,
    });
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
  // Before the features that queue events (email outbox, auth, notifications, chat) are built.
  const webhooks = createWebhooks({
    config,
    db: database.db,
    logger,
    ...(options.webhookResolver ? { resolve: options.webhookResolver } : {}),
  });
  const outbox = createEmailOutbox({
    db: database.db,
    mailer,
    logger: logger.child({ component: 'email-outbox' }),
    pollMs: config.EMAIL_QUEUE_POLL_MS,
    maxAttempts: config.EMAIL_MAX_ATTEMPTS,
    retryBaseMs: config.EMAIL_RETRY_BASE_MS,
    onOutcome: (tx, outcome) =>
      webhooks.events
        .enqueue(tx, [
          {
            type: outcome.status === 'sent' ? 'email.sent' : 'email.failed',
            data: {
              id: outcome.id,
              to: outcome.to,
              subject: outcome.subject,
              kind: outcome.kind,
              attempts: outcome.attempts,
              error: outcome.error,
            },
          },
        ])
        .then(() => undefined),
  });
  const lifecycle = createLifecycle({
    logger,
    timeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    drainMs: config.SHUTDOWN_DRAIN_MS,
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
  const auth = createAuth({
    config,
    db: database.db,
    store,
    outbox,
    logger,
    realtime,
    revocation,
    webhookEvents: webhooks.events,
  });
  const sessions = createSessionResolver(auth, { store, db: database.db, logger, revocation });

  app.decorate('ctx', {
    config,
    logger,
    database,
    store,
    mailer,
    outbox,
    realtime,
    auth,
    sessions,
    revocation,
    lifecycle,
    metrics,
    overload,
    webhooks,
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

  registerAuthBridge(app, auth, config.API_BASE_URL);
  // The bundled web app (its onRequest hook answers static files and page navigations before routing does).
  registerWebApp(app);

  // features
  registerNotifications(app);
  // Before the routes that accept keys (admin broadcast, metrics) use `app.apiKeys`.
  registerApiKeys(app);
  registerAdmin(app);
  registerChat(app);
  await registerWebhooks(app);

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
