// Process entry only: config → buildApp → listen → signal handling. On SIGTERM/SIGINT health turns 503 at once
// and app.close() runs the shutdown phases in order (see ops/lifecycle.ts): in-flight requests get up to
// SHUTDOWN_GRACE_MS, the whole sequence SHUTDOWN_GRACE_MS + SHUTDOWN_TIMEOUT_MS;
// exit code 0 when the sequence finished, 1 when it timed out, failed or a second signal forced the exit.
import { buildApp } from './app.js';
import { ConfigError, loadConfig, startupSummary } from './config.js';
import { DataDirLockedError } from './infra/data-dir-lock.js';

async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  let app: Awaited<ReturnType<typeof buildApp>>;
  try {
    app = await buildApp(config, { prettyLogs: !config.isProduction && process.stdout.isTTY });
  } catch (err) {
    // A broken email template override (EMAIL_TEMPLATES_DIR) is reported like invalid configuration.
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    if (err instanceof DataDirLockedError) {
      process.stderr.write(
        `Herald cannot start: ${err.message}. Stop the other process or give this one another DATA_DIR.\n`,
      );
      process.exit(1);
    }
    throw err;
  }
  await app.listen({ port: config.PORT, host: config.HOST });
  // The one line an operator reads after a start: where data, store and mail go, and where the API is described.
  const { summary, line } = startupSummary(config);
  app.log.info({ startup: summary }, line);

  // pino writes stdout asynchronously and its flush() returns at once; exiting while a write is in flight would
  // let the synchronous flush at exit overtake it (the shutdown sequence would be logged out of order). A short
  // pause lets pending writes land.
  const exit = (code: number) => {
    setTimeout(() => process.exit(code), 100);
  };

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      app.log.warn({ signal }, 'second signal: forcing exit');
      exit(1);
      return;
    }
    // Health answers 503 from this moment, before any connection is touched.
    app.ctx.lifecycle.beginShutdown();
    const timeoutMs = config.SHUTDOWN_GRACE_MS + config.SHUTDOWN_TIMEOUT_MS;
    app.log.info({ signal, timeoutMs, graceMs: config.SHUTDOWN_GRACE_MS }, 'shutting down');
    const timer = setTimeout(() => {
      app.log.error('shutdown timed out: forcing exit');
      exit(1);
    }, timeoutMs);
    timer.unref();
    app.close().then(
      () => {
        app.log.info('exiting');
        exit(0);
      },
      (err: unknown) => {
        app.log.error({ err }, 'shutdown failed');
        exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('unhandledRejection', (reason) => app.log.error({ err: reason }, 'unhandled rejection'));
}

main().catch((err: unknown) => {
  process.stderr.write(
    `Herald failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
