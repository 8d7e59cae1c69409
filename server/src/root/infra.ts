// The infrastructure the features run on: PostgreSQL (migrated before anything reads it), the store (Redis,
// Redis Cluster or in-process) and the mailer. Tests may hand in their own pieces to force failures.
import type { Config } from '../config.js';
import { createDatabase, type Database } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import { checkSmtp, createMailer, type Mailer } from '../infra/mailer.js';
import { createStore, type Store } from '../infra/store.js';

export interface Infra {
  database: Database;
  store: Store;
  mailer: Mailer;
}

export async function openInfra(
  config: Config,
  logger: Logger,
  overrides: Partial<Infra> = {},
): Promise<Infra> {
  const database =
    overrides.database ??
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
    if (!overrides.database) await database.close().catch(() => {});
    throw err;
  }
  const store =
    overrides.store ??
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
    overrides.mailer ??
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
  return { database, store, mailer };
}
