// Connection defaults for tests (DESIGN §6); overridable for other machines.
export const TEST_PG_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const TEST_REDIS_URL = process.env.TEST_CACHE_URL ?? 'redis://127.0.0.1:6379';
export const TEST_AUTH_SECRET = 'test-secret-test-secret-test-secret-0123456789';

/** Per-client limits off: tests drive many users from one address (test/http/fairness.test.ts turns them on). */
export const CLIENT_LIMITS_OFF: Record<string, string> = {
  CLIENT_MAX_IN_FLIGHT: '0',
  CLIENT_MAX_IN_FLIGHT_PER_IP: '0',
  CLIENT_RATE_LIMIT_PER_SECOND: '0',
  CLIENT_RATE_LIMIT_PER_SECOND_PER_IP: '0',
};
