// Builds a real app against the real PostgreSQL (own database per file), Redis (own key prefix) and SMTP.
import { randomBytes } from 'node:crypto';
import { type App, type BuildOptions, buildApp } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config.js';
import { createTestDatabase, type TestDatabase } from './db.js';
import { CLIENT_LIMITS_OFF, TEST_AUTH_SECRET, TEST_REDIS_URL } from './env.js';
import { PGBOUNCER_MODE, startPgBouncer } from './pgbouncer.js';
import { startSmtp, type TestSmtp } from './smtp.js';

export interface TestEnv {
  db: TestDatabase;
  smtp: TestSmtp;
  /** Shared by every app of this env, so several apps behave like instances of one deployment. */
  prefix: string;
  baseEnv: Record<string, string>;
  apps: App[];
  /** Builds another app (instance) on the same database, store prefix and SMTP server. */
  app(env?: Record<string, string>, options?: BuildOptions): Promise<App>;
  config(env?: Record<string, string>): Config;
  close(): Promise<void>;
}

export const TEST_ORIGIN = 'http://localhost:3000';

export async function createTestEnv(env: Record<string, string> = {}): Promise<TestEnv> {
  const [db, smtp] = await Promise.all([createTestDatabase(), startSmtp()]);
  const prefix = `t:${randomBytes(5).toString('hex')}:`;
  // HERALD_TEST_PGBOUNCER=1: every app reaches its database through a private PgBouncer (transaction mode).
  const bouncer = PGBOUNCER_MODE ? await startPgBouncer() : undefined;
  const baseEnv: Record<string, string> = {
    NODE_ENV: 'test',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DATABASE_URL: bouncer ? bouncer.urlFor(db.url) : db.url,
    ...(bouncer ? { DATABASE_DIRECT_URL: db.url } : {}),
    CACHE_URL: TEST_REDIS_URL,
    CACHE_KEY_PREFIX: prefix,
    AUTH_SECRET: TEST_AUTH_SECRET,
    API_BASE_URL: 'http://localhost:3001',
    FE_BASE_URL: TEST_ORIGIN,
    CORS_ALLOWLISTED_ORIGINS: TEST_ORIGIN,
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: String(smtp.port),
    // Tests sign in many users from one address; rate-limit tests lower this explicitly.
    AUTH_RATE_LIMIT_MAX: '10000',
    // The suite runs on a shared, loaded machine: only the overload tests turn the guard on.
    OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
    // Tests drive many users from one address as fast as the machine goes: only the fairness tests turn the
    // per-client limits on (test/http/fairness.test.ts).
    ...CLIENT_LIMITS_OFF,
    ...env,
  };
  const apps: App[] = [];
  const testEnv: TestEnv = {
    db,
    smtp,
    prefix,
    baseEnv,
    apps,
    config: (extra = {}) => loadConfig({ ...baseEnv, ...extra }),
    async app(extra = {}, options = {}) {
      const app = await buildApp(loadConfig({ ...baseEnv, ...extra }), options);
      apps.push(app);
      return app;
    },
    async close() {
      await Promise.allSettled(apps.map((a) => a.close()));
      await smtp.close();
      await bouncer?.close();
      await db.drop();
    },
  };
  return testEnv;
}
