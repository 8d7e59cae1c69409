// Process entry only: config → (tracing) → wait for the database and store → buildApp → listen → signal handling.
// On SIGTERM/SIGINT health turns 503 at once and app.close() runs the shutdown phases in order (see
// ops/lifecycle.ts): in-flight requests get up to SHUTDOWN_GRACE_MS, the whole sequence SHUTDOWN_GRACE_MS +
// SHUTDOWN_TIMEOUT_MS; exit code 0 when the sequence finished, 1 when it timed out,
// failed or a second signal forced the exit. An uncaught exception or unhandled rejection ends the process with
// exit 1 after the same sequence (ops/fatal.ts).
//
// Only modules that load no instrumented package (pg, ioredis, fastify, node:http users) are imported statically:
// the app is imported once tracing is in place (ops/telemetry.ts), so its imports are the instrumented ones.
import pino from 'pino';
import { type Config, ConfigError, loadConfig, startupSummary } from './config.js';
import { DataDirLockedError } from './infra/data-dir-lock.js';
import { loggerOptions } from './infra/logger.js';
import { installFatalHandlers } from './ops/fatal.js';
import { nodeVersionWarning } from './ops/node-version.js';
import { startTelemetry, type Telemetry } from './ops/telemetry.js';

type App = Awaited<ReturnType<typeof import('./app.js').buildApp>>;

// pino writes stdout asynchronously and its flush() returns at once; exiting while a write is in flight would
// let the synchronous flush at exit overtake it (the shutdown sequence would be logged out of order). A short
// pause lets pending writes land.
const exit = (code: number) => {
  setTimeout(() => process.exit(code), 100);
};

/** A start-up failure that is the operator's to fix: one line on stderr, exit 1, no stack. */
function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  exit(1);
  // Keep the event loop from running anything else meanwhile.
  throw new StartupAbort();
}
class StartupAbort extends Error {}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  // Lines before the app (and its logger) exist: node version, tracing, waiting for the database and store.
  const startupLog = pino(loggerOptions(config.LOG_LEVEL, false));
  let app: App | undefined;
  let telemetry: Telemetry | null = null;
  const closeAll = async () => {
    if (app) await app.close();
    await telemetry?.shutdown();
  };
  installFatalHandlers({
    logger: () => app?.log ?? startupLog,
    shutdown: () => {
      if (!app) return telemetry?.shutdown();
      app.ctx.lifecycle.beginShutdown();
      return closeAll();
    },
    timeoutMs: config.SHUTDOWN_GRACE_MS + config.SHUTDOWN_TIMEOUT_MS,
    exit,
  });

  const nodeWarning = nodeVersionWarning();
  if (nodeWarning) startupLog.warn({ node: process.versions.node }, nodeWarning);

  telemetry = await startTelemetry(config.tracing, startupLog);

  const { waitForDependencies, StartupWaitError } = await import('./ops/startup-wait.js');
  try {
    await waitForDependencies({
      databaseUrl: config.DATABASE_URL,
      cacheUrl: config.CACHE_URL,
      cacheCluster: config.CACHE_CLUSTER,
      waitMs: config.STARTUP_WAIT_MS,
      logger: startupLog,
    });
  } catch (err) {
    if (err instanceof StartupWaitError) fail(err.message);
    throw err;
  }

  const [{ buildApp }, { EmbeddedDatabaseUnavailableError }] = await Promise.all([
    import('./app.js'),
    import('./infra/db.js'),
  ]);
  try {
    app = await buildApp(config, { prettyLogs: !config.isProduction && process.stdout.isTTY });
  } catch (err) {
    // A broken email template override (EMAIL_TEMPLATES_DIR) is reported like invalid configuration.
    if (err instanceof ConfigError) fail(err.message);
    if (err instanceof DataDirLockedError) {
      fail(`Herald cannot start: ${err.message}. Stop the other process or give this one another DATA_DIR.`);
    }
    if (err instanceof EmbeddedDatabaseUnavailableError) fail(`Herald cannot start: ${err.message}.`);
    throw err;
  }
  const started = app;
  await started.listen({ port: config.PORT, host: config.HOST });
  // The one line an operator reads after a start: where data, store and mail go, and where the API is described.
  const { summary, line } = startupSummary(config);
  started.log.info({ startup: summary }, line);

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      started.log.warn({ signal }, 'second signal: forcing exit');
      exit(1);
      return;
    }
    // Health answers 503 from this moment, before any connection is touched.
    started.ctx.lifecycle.beginShutdown();
    const timeoutMs = config.SHUTDOWN_GRACE_MS + config.SHUTDOWN_TIMEOUT_MS;
    started.log.info({ signal, timeoutMs, graceMs: config.SHUTDOWN_GRACE_MS }, 'shutting down');
    const timer = setTimeout(() => {
      started.log.error('shutdown timed out: forcing exit');
      exit(1);
    }, timeoutMs);
    timer.unref();
    closeAll().then(
      () => {
        started.log.info('exiting');
        exit(0);
      },
      (err: unknown) => {
        started.log.error({ err }, 'shutdown failed');
        exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

main().catch((err: unknown) => {
  if (err instanceof StartupAbort) return;
  process.stderr.write(
    `Herald failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  exit(1);
});
