// The composition root: builds every part in floor order (infrastructure, HTTP and real-time core, auth, the
// features, admin and ops), hands each its typed dependencies, passes on the handles they return, attaches the
// event port's consumers and registers the shutdown phases (docs/architecture.md "Composition root").
import { registerAdmin } from './admin/index.js';
import { registerApiKeys } from './api-keys/index.js';
import { createAuth } from './auth/auth.js';
import { registerAuthBridge } from './auth/bridge.js';
import { createSessionResolver, type SessionResolver } from './auth/guard.js';
import { createRevocation } from './auth/revocation.js';
import { createGetSessionFastPath } from './auth/session-read.js';
import { registerChat } from './chat/index.js';
import type { Config } from './config.js';
import type { App, AppContext } from './context.js';
import { createEmail, createEmailRendererFromConfig, registerEmail } from './email/index.js';
import { idempotencyRetentionTask } from './http/idempotency.js';
import { registerClientConfig, registerWebApp } from './http/web-app.js';
import { emailOutboxRetentionTask } from './infra/email-outbox.js';
import { createHousekeeping } from './infra/housekeeping.js';
import { canPrettyPrint } from './infra/logger.js';
import type { Store } from './infra/store.js';
import { registerNotifications } from './notifications/index.js';
import { registerHealth } from './ops/health.js';
import { createLifecycle } from './ops/lifecycle.js';
import { registerMetrics } from './ops/metrics.js';
import { createHeraldMetrics, installHttpMetrics } from './ops/prometheus.js';
import { registerPush } from './push/index.js';
import { createRealtime, registerRealtimeTestRoutes } from './realtime/index.js';
import { createChannels } from './root/channels.js';
import { registerApiDocs } from './root/docs.js';
import { createFrontDoor, installBrowserPolicy } from './root/fastify.js';
import { openInfra } from './root/infra.js';
import { registerWebhooks } from './webhooks/index.js';
import type { Resolver } from './webhooks/ssrf.js';

export type { App, AppContext } from './context.js';

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

export async function buildApp(config: Config, options: BuildOptions = {}): Promise<App> {
  // First: a broken email template override stops start-up before a database or store is opened.
  const emailRenderer = createEmailRendererFromConfig(config);
  // Parts the front door reads once requests flow; set below.
  let late: { store: Store; sessions?: SessionResolver; dbWaiting: () => number } | undefined;
  const { app, drain, overload, clientLimits } = createFrontDoor(config, options, {
    store: () => {
      if (!late) throw new Error('store used before start-up finished');
      return late.store;
    },
    sessions: () => late?.sessions,
    dbWaiting: () => late?.dbWaiting() ?? 0,
  });
  const logger = app.log;
  if (options.prettyLogs && !canPrettyPrint()) {
    logger.info('pino-pretty is not installed (production install?): logging JSON');
  }
  for (const warning of config.warnings) logger.warn(warning);

  // infra
  const { database, store, mailer } = await openInfra(config, logger, options.overrides);
  late = { store, dbWaiting: () => database.waiting?.() ?? 0 };
  // The event port with its consumers attached, before its writers; push before the notifications feature, whose
  // delivery runs its strategy; the email outbox every feature sends through.
  const { events, webhooks, push, outbox } = createChannels(config, { database, mailer, logger }, options);
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
  // One scheduler for every table owner's clean-up; the features register theirs below.
  const housekeeping = createHousekeeping({
    db: database.db,
    logger,
    intervalMs: config.RETENTION_INTERVAL_MS,
  });
  housekeeping.register(emailOutboxRetentionTask());
  housekeeping.register(idempotencyRetentionTask());
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
  late.sessions = sessions;
  // Herald's own answer to GET /auth/get-session when it is better-auth's exact answer (auth/session-read.ts).
  const sessionRead = createGetSessionFastPath(auth, { sessions });
  app.decorateRequest('auth', null);

  await installBrowserPolicy(app, config);
  await registerApiDocs(app, { config, auth });
  registerAuthBridge(app, {
    ...{ auth, baseUrl: config.API_BASE_URL, database, store, sessions, revocation },
    getSession: sessionRead,
  });
  // The bundled web app (its onRequest hook answers static files and page navigations before routing does).
  registerWebApp(app, config, logger);

  // features
  const base = { config, logger, database, store, sessions, lifecycle, housekeeping };
  const notifications = registerNotifications(app, {
    ...base,
    realtime,
    revocation,
    events,
    notificationEmails: email.notificationEmails,
    extraStrategies: [push.strategy],
    observeFanout: (seconds) => metrics.sseFanout.observe(seconds),
  });
  registerEmail(app, { ...base, events, email });
  const apiKeys = registerApiKeys(app, base);
  registerAdmin(app, {
    ...base,
    drain,
    notifications: notifications.service,
    apiKeys,
    presence: realtime.presence,
  });
  registerChat(app, {
    ...base,
    realtime,
    revocation,
    events,
    notifications: notifications.service,
    observeFanout: (seconds) => metrics.chatFanout.observe(seconds),
    countFanoutWrites: (frames, writes) => {
      metrics.chatFanoutFrames.inc(frames);
      metrics.chatSocketWrites.inc(writes);
    },
    observeSendStage: (stage, seconds) => metrics.chatSendStage.observe({ stage }, seconds),
  });
  await registerWebhooks(app, { ...base, realtime, webhooks });
  registerPush(app, { ...base, push });

  // ops
  registerHealth(app, { config, lifecycle, database, store, overload, realtime });
  const sources = { config, logger, realtime, outbox, webhooks, sessions, database, push };
  registerMetrics(app, {
    sources,
    apiKeys,
    renderPrometheus: (report, live) => metrics.render(report, live),
    sseStreams: () => notifications.streams.stats().streams,
  });
  registerClientConfig(app, config);
  // Test-only observation routes of the real-time core (NODE_ENV=test only).
  registerRealtimeTestRoutes(app, { config, realtime });

  lifecycle.onShutdown('close-pools', 'revocation', async () => revocation.close());
  outbox.start();
  housekeeping.start();
  // Stopped with the other workers, before the pools they write through close.
  lifecycle.onShutdown('close-connections', 'email-outbox', () => outbox.stop());
  lifecycle.onShutdown('close-connections', 'housekeeping', () => housekeeping.stop());
  lifecycle.onShutdown('close-pools', 'mailer', () => mailer.close());
  lifecycle.onShutdown('close-pools', 'store', () => store.close());
  lifecycle.onShutdown('close-pools', 'database', () => database.close());
  app.addHook('onClose', async () => {
    await lifecycle.shutdown(onStepError);
  });

  await app.ready();
  const ctx: AppContext = {
    ...{
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
    },
    ...{ lifecycle, metrics, overload, events, drain, clientLimits, webhooks, push, housekeeping },
  };
  return Object.assign(app, {
    ctx,
    notifications: notifications.service,
    notificationStreams: notifications.streams,
    apiKeys,
  });
}
