// Owns the one environment schema. Everything else receives a typed Config; nothing else reads process.env.
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { isTrustProxy, normalizeOrigin } from './http/proxy.js';
import { sanitizeInstanceId } from './realtime/instance-id.js';

const bool = (fallback: boolean) =>
  z
    .string()
    .trim()
    .toLowerCase()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === '') return fallback;
      if (['1', 'true', 'yes', 'on'].includes(v)) return true;
      if (['0', 'false', 'no', 'off'].includes(v)) return false;
      ctx.addIssue({ code: 'custom', message: `expected true or false, got "${v}"` });
      return z.NEVER;
    });

const int = (fallback: number, min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .trim()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v === '') return fallback;
      const n = Number(v);
      if (!Number.isInteger(n) || n < min || n > max) {
        ctx.addIssue({
          code: 'custom',
          message: `expected an integer between ${min} and ${max}, got "${v}"`,
        });
        return z.NEVER;
      }
      return n;
    });

const optionalString = z
  .string()
  .trim()
  .optional()
  .transform((v) => (v === undefined || v === '' ? undefined : v));

/** Strips surrounding quotes and whitespace that .env files and shells tend to leave on list items. */
function cleanListItem(item: string): string {
  return item
    .trim()
    .replace(/^['"]+|['"]+$/g, '')
    .trim();
}

const list = z
  .string()
  .optional()
  .transform((v) => (v ? v.split(',').map(cleanListItem).filter(Boolean) : []));

const httpUrl = (name: string) =>
  optionalString.refine(
    (v) => {
      if (v === undefined) return true;
      try {
        const u = new URL(v);
        return u.protocol === 'http:' || u.protocol === 'https:';
      } catch {
        return false;
      }
    },
    { message: `${name} must be an absolute http(s) URL` },
  );

/** Social providers better-auth ships; any other SOCIAL_PROVIDER id needs SOCIAL_ISSUER (generic OIDC). */
export const BUILT_IN_SOCIAL_PROVIDERS: ReadonlySet<string> = new Set([
  'apple',
  'discord',
  'facebook',
  'github',
  'gitlab',
  'google',
  'linkedin',
  'microsoft',
  'reddit',
  'slack',
  'spotify',
  'twitch',
  'twitter',
]);

/** CACHE_URL against CACHE_CLUSTER: one URL for one Redis, a list of seed nodes for a cluster. */
function cacheUrlProblems(url: string | undefined, cluster: boolean): string[] {
  if (url === undefined) {
    return cluster ? ['CACHE_CLUSTER=true requires CACHE_URL (comma-separated seed node URLs)'] : [];
  }
  const entries = url.split(',').map((u) => u.trim());
  if (!cluster && entries.length > 1) {
    return ['CACHE_URL lists several nodes: set CACHE_CLUSTER=true for a Redis Cluster, or give one URL'];
  }
  const bad = entries.filter((u) => {
    if (!/^rediss?:\/\/./.test(u)) return true;
    try {
      const parsed = new URL(u);
      return parsed.hostname === '' || (parsed.port !== '' && Number(parsed.port) > 65535);
    } catch {
      return true;
    }
  });
  if (bad.length === 0) return [];
  // Never echo the entries themselves: they may carry a password.
  return [
    `CACHE_URL: ${bad.length} of ${entries.length} entries are not redis:// or rediss:// URLs with a host (expected redis://[user:password@]host:port${cluster ? ',redis://host:port,…' : ''})`,
  ];
}

/** Checks that need only the raw environment, so they are reported even when other variables are invalid. */
function rawProblems(env: Record<string, string | undefined>): string[] {
  const problems: string[] = [];
  const has = (name: string) => (env[name] ?? '').trim() !== '';
  if ((env.NODE_ENV ?? '').trim() === 'production') {
    for (const name of ['DATABASE_URL', 'CACHE_URL', 'AUTH_SECRET', 'API_BASE_URL'] as const) {
      if (!has(name)) problems.push(`${name}: required when NODE_ENV=production`);
    }
    if (!has('FE_BASE_URL') && !has('FRONTEND_URL')) {
      problems.push('FE_BASE_URL: required when NODE_ENV=production (or its alias FRONTEND_URL)');
    }
  }
  return problems;
}

export const EnvSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).optional().default('development'),
  PORT: int(3001, 0, 65535),
  HOST: optionalString.default('0.0.0.0'),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .optional()
    .default('info'),
  CORS_ALLOWLISTED_ORIGINS: list,
  DATABASE_URL: optionalString.refine((v) => v === undefined || /^postgres(ql)?:\/\//.test(v), {
    message: 'DATABASE_URL must start with postgres:// or postgresql://',
  }),
  DATA_DIR: optionalString.default('./data'),
  // One URL, or with CACHE_CLUSTER a comma-separated list of seed nodes (checked below, knowing CACHE_CLUSTER).
  CACHE_URL: optionalString.refine((v) => v === undefined || /^rediss?:\/\//.test(v), {
    message: 'CACHE_URL must start with redis:// or rediss://',
  }),
  CACHE_CLUSTER: bool(false),
  CACHE_KEY_PREFIX: optionalString.default('herald:'),
  // Bound on every store command: a stalled store (paused, overloaded, half-open connection) counts as an outage
  // after this long, so the bus degrades and sessions fall back to PostgreSQL instead of every request waiting.
  CACHE_COMMAND_TIMEOUT_MS: int(1_500, 50, 60_000),
  // PostgreSQL statement_timeout for the pool (0 = none); PGlite runs in-process and ignores it.
  DATABASE_STATEMENT_TIMEOUT_MS: int(10_000, 0, 3_600_000),
  ENABLE_DISTRIBUTED_CHAT: bool(true),
  INSTANCE_ID: optionalString,
  METRICS_API_KEY: optionalString.refine((v) => v === undefined || v.length >= 32, {
    message: 'METRICS_API_KEY must be at least 32 characters long',
  }),
  AUTH_SECRET: optionalString.refine((v) => v === undefined || v.length >= 32, {
    message: 'AUTH_SECRET must be at least 32 characters long',
  }),
  API_BASE_URL: httpUrl('API_BASE_URL'),
  FE_BASE_URL: httpUrl('FE_BASE_URL'),
  FRONTEND_URL: httpUrl('FRONTEND_URL'),
  // The bundled web app (web/dist) served at `/` by this service; off when the front end is deployed elsewhere.
  SERVE_WEB_APP: bool(true),
  // Where the built web app is read from (default: web/dist of this repository).
  WEB_APP_DIR: optionalString,
  COOKIE_SAME_SITE: z.enum(['lax', 'strict', 'none']).optional().default('lax'),
  SMTP_HOST: optionalString,
  SMTP_PORT: int(587, 1, 65535),
  SMTP_SECURE: bool(false),
  SMTP_USER: optionalString,
  // SMTP_PASSWORD is the contract's name; SMTP_PASS an accepted alias (both set and different is an error).
  SMTP_PASSWORD: optionalString,
  SMTP_PASS: optionalString,
  // How long the start-up SMTP check (connection + login) may take before it is reported as failed.
  SMTP_VERIFY_TIMEOUT_MS: int(5_000, 100, 60_000),
  SMTP_FROM: optionalString.default('Herald <no-reply@localhost>'),
  SOCIAL_PROVIDER: optionalString.default('oidc').refine((v) => /^[a-z][a-z0-9_-]{0,31}$/.test(v), {
    message: 'SOCIAL_PROVIDER must be a lowercase provider id such as "oidc", "google" or "github"',
  }),
  SOCIAL_ISSUER: httpUrl('SOCIAL_ISSUER'),
  SOCIAL_CLIENT_ID: optionalString,
  SOCIAL_CLIENT_SECRET: optionalString,
  ADMIN_EMAILS: list.transform((emails) => emails.map((e) => e.toLowerCase())),
  TRUST_PROXY: optionalString.refine((v) => v === undefined || isTrustProxy(v), {
    message:
      'TRUST_PROXY must be true, false, a hop count, or a comma-separated list of proxy addresses/CIDRs',
  }),
  ACTION_ALLOWED_DOMAINS: list.transform((hosts) => hosts.map((h) => h.toLowerCase())),
  BROADCAST_BATCH_SIZE: int(500, 1, 10_000),
  BODY_LIMIT_BYTES: int(64 * 1024, 1024, 10 * 1024 * 1024),
  // Slow-client limits (Node's HTTP server): the whole request (headers + body) must arrive within
  // HTTP_REQUEST_TIMEOUT_MS, the headers within HTTP_HEADERS_TIMEOUT_MS; an idle keep-alive connection is closed
  // after HTTP_KEEP_ALIVE_TIMEOUT_MS. None of them limits a response, so SSE streams and WebSockets live on.
  HTTP_REQUEST_TIMEOUT_MS: int(30_000, 100, 10 * 60_000),
  HTTP_HEADERS_TIMEOUT_MS: int(10_000, 100, 10 * 60_000),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: int(72_000, 100, 10 * 60_000),
  // Open TCP connections per client address (socket address, also behind a proxy); 0 turns the cap off.
  HTTP_MAX_CONNECTIONS_PER_IP: int(256, 0),
  AUTH_RATE_LIMIT_MAX: int(10, 1),
  AUTH_RATE_LIMIT_WINDOW_S: int(60, 1),
  // Requests per API key and window, counted in the shared store (per instance while it is unreachable).
  API_KEY_RATE_LIMIT_MAX: int(600, 1),
  API_KEY_RATE_LIMIT_WINDOW_S: int(60, 1),
  // How often the batched `lastUsedAt` of API keys is written (and once more at shutdown).
  API_KEY_LAST_USED_FLUSH_MS: int(5_000, 10, 10 * 60_000),
  // Real-time timings (contract defaults; tests shrink them).
  HEARTBEAT_INTERVAL_MS: int(10_000, 50),
  REGISTRY_TTL_MS: int(30_000, 100),
  DEAD_INSTANCE_MS: int(45_000, 100),
  PRESENCE_DEBOUNCE_MS: int(500, 0),
  DEDUP_WINDOW_MS: int(5_000, 0),
  SSE_KEEPALIVE_MS: int(15_000, 50),
  WS_PING_INTERVAL_MS: int(30_000, 50),
  SHUTDOWN_TIMEOUT_MS: int(10_000, 100),
  // Pause after health turns 503 on shutdown so load balancers stop routing before connections close.
  SHUTDOWN_DRAIN_MS: int(0, 0, 60_000),
  BUS_MAX_PAYLOAD_BYTES: int(256 * 1024, 1024),
  CHAT_THROTTLE_LIMIT: int(5, 1),
  CHAT_THROTTLE_WINDOW_MS: int(10_000, 100),
  CHAT_MAX_CONNECTIONS_PER_IP: int(50, 1),
  CHAT_MAX_CONNECTIONS_PER_USER: int(10, 1),
  // Inbound frames of any type (ping included) per socket per 10 s; beyond it the socket gets `throttled`.
  CHAT_FRAME_LIMIT: int(200, 1),
  // Bytes a chat socket may have waiting to be sent before it is treated as a slow consumer and closed.
  CHAT_SEND_BUFFER_LIMIT_BYTES: int(1024 * 1024, 16 * 1024),
  RETENTION_INTERVAL_MS: int(60 * 60 * 1000, 1000),
  RETENTION_MAX_AGE_DAYS: int(90, 1),
  RETENTION_MAX_PER_USER: int(1000, 1),
  EMAIL_QUEUE_POLL_MS: int(2_000, 50),
  EMAIL_MAX_ATTEMPTS: int(8, 1),
  // First retry delay of a failed notification email; doubles per attempt (capped at 1 h).
  EMAIL_RETRY_BASE_MS: int(5_000, 10),
  // Webhooks (docs/architecture.md, "Webhooks"): how often each instance looks for due deliveries (new events
  // queued on the same instance are sent at once), and how long a failing delivery keeps being retried.
  WEBHOOK_QUEUE_POLL_MS: int(1_000, 20),
  // First retry delay; doubles per attempt (full jitter, capped at 1 h) until WEBHOOK_RETRY_WINDOW_MS has passed.
  WEBHOOK_RETRY_BASE_MS: int(10_000, 10),
  WEBHOOK_RETRY_WINDOW_MS: int(25 * 60 * 60 * 1000, 1000),
  // Per attempt: the receiver must answer (headers and body) within this, and at most 64 KiB of body is read.
  WEBHOOK_TIMEOUT_MS: int(10_000, 50, 120_000),
  // Concurrent sends per endpoint, and in total, on one instance.
  WEBHOOK_CONCURRENCY_PER_ENDPOINT: int(4, 1, 100),
  WEBHOOK_CONCURRENCY: int(64, 1, 1000),
  // Private, loopback and link-local target addresses are refused unless this is true (development, tests).
  WEBHOOK_ALLOW_PRIVATE_URLS: bool(false),
  // An SSE client whose unsent bytes exceed this is dropped (it reconnects and resumes).
  SSE_MAX_BUFFERED_BYTES: int(1024 * 1024, 1024),
  // Open notification streams per user and per client IP on one instance; more → 429 TOO_MANY_STREAMS.
  SSE_MAX_STREAMS_PER_USER: int(10, 1),
  SSE_MAX_STREAMS_PER_IP: int(50, 1),
  // Stream opens allowed per user (and per client IP) and window on one instance; more → 429 RATE_LIMITED.
  SSE_OPEN_RATE_LIMIT: int(30, 1),
  SSE_OPEN_RATE_WINDOW_MS: int(60_000, 100),
  // GET /health reuses its database and store check results for this long (load balancers poll it; 0 = check
  // on every request). Shutdown and overload are reported at once whatever this says.
  HEALTH_CACHE_MS: int(1_000, 0, 60_000),
  // The access log ("incoming request" / "request completed" at info) of the polled read routes (GET /health,
  // /notification/unread-count, /notification/counts, /notification/list); off by default: they are the bulk of
  // the traffic and each line costs a write. Errors on them are logged either way.
  ACCESS_LOG_POLLED_ROUTES: bool(false),
  // Overload protection (http/overload.ts): beyond these, requests are refused at once with 503 UNAVAILABLE and
  // Retry-After instead of queueing until they time out. 0 turns a threshold off.
  // Mean event-loop delay over the last sample interval (beyond the timer's own resolution).
  OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: int(1_000, 0, 60_000),
  // Event-loop utilisation over the last sample interval, in percent (100 = never idle).
  OVERLOAD_MAX_EVENT_LOOP_UTILIZATION_PCT: int(0, 0, 100),
  OVERLOAD_MAX_HEAP_USED_BYTES: int(0, 0),
  // Queries waiting for one of the instance's PostgreSQL pool connections (10): past this, new requests are
  // refused instead of joining a queue that ends in the pool's 5 s connect timeout (a 500).
  OVERLOAD_MAX_DB_WAITING: int(200, 0),
  OVERLOAD_SAMPLE_INTERVAL_MS: int(500, 10, 3_600_000),
  OVERLOAD_RETRY_AFTER_S: int(2, 1, 3_600),
});

export type Env = z.input<typeof EnvSchema>;
type ParsedEnv = z.output<typeof EnvSchema>;

export interface Config
  extends Omit<ParsedEnv, 'FRONTEND_URL' | 'INSTANCE_ID' | 'AUTH_SECRET' | 'SMTP_PASS'> {
  isProduction: boolean;
  /** Non-fatal findings (likely misspelt variables), logged once at start-up. */
  warnings: string[];
  INSTANCE_ID: string;
  AUTH_SECRET: string;
  API_BASE_URL: string;
  FE_BASE_URL: string;
  /** True only when a store is configured and ENABLE_DISTRIBUTED_CHAT is on. */
  distributed: boolean;
  /**
   * The one list of origins a browser may act from (better-auth's trustedOrigins, the request guards, the chat
   * socket's Origin check, CORS): CORS_ALLOWLISTED_ORIGINS, the front end and the service itself, and in development
   * each loopback origin under its other loopback names too (trustedOriginsOf).
   */
  trustedOrigins: string[];
  /** Origins CORS answers: CORS_ALLOWLISTED_ORIGINS, in development with their loopback aliases. */
  corsOrigins: string[];
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** In development the auth secret is generated once and kept under DATA_DIR so sessions survive restarts. */
function developmentSecret(dataDir: string): string {
  const file = path.join(dataDir, 'auth-secret');
  if (existsSync(file)) {
    const stored = readFileSync(file, 'utf8').trim();
    if (stored.length >= 32) return stored;
  }
  mkdirSync(dataDir, { recursive: true });
  const secret = randomBytes(32).toString('base64url');
  writeFileSync(file, secret, { mode: 0o600 });
  return secret;
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const missing = rawProblems(env).filter(
      (p) => !parsed.error.issues.some((i) => p.startsWith(`${String(i.path[0])}:`)),
    );
    throw new ConfigError([
      ...parsed.error.issues.map((issue) => `${issue.path.join('.') || 'environment'}: ${issue.message}`),
      ...missing,
    ]);
  }
  const e = parsed.data;
  const problems: string[] = rawProblems(env);
  const isProduction = e.NODE_ENV === 'production';
  const feBaseUrl = e.FE_BASE_URL ?? e.FRONTEND_URL;
  if (e.FE_BASE_URL && e.FRONTEND_URL && e.FE_BASE_URL !== e.FRONTEND_URL) {
    problems.push('FE_BASE_URL and FRONTEND_URL are both set and differ; set only one');
  }
  if (e.COOKIE_SAME_SITE === 'none' && e.API_BASE_URL && !e.API_BASE_URL.startsWith('https:')) {
    problems.push(
      'COOKIE_SAME_SITE: "none" requires an https API_BASE_URL (browsers drop insecure SameSite=None cookies)',
    );
  }
  const origins: string[] = [];
  for (const entry of e.CORS_ALLOWLISTED_ORIGINS) {
    const origin = normalizeOrigin(entry);
    if (origin) origins.push(origin);
    else {
      problems.push(
        `CORS_ALLOWLISTED_ORIGINS: "${entry}" is not an origin (expected http(s)://host[:port], no path)`,
      );
    }
  }
  problems.push(...cacheUrlProblems(e.CACHE_URL, e.CACHE_CLUSTER));
  if (e.HTTP_HEADERS_TIMEOUT_MS > e.HTTP_REQUEST_TIMEOUT_MS) {
    // Node refuses this combination at server creation; say so with both names instead.
    problems.push('HTTP_HEADERS_TIMEOUT_MS must not exceed HTTP_REQUEST_TIMEOUT_MS');
  }
  if (e.SMTP_PASSWORD && e.SMTP_PASS && e.SMTP_PASSWORD !== e.SMTP_PASS) {
    problems.push('SMTP_PASSWORD and SMTP_PASS (its alias) are both set and differ; set only SMTP_PASSWORD');
  }
  const smtpPassword = e.SMTP_PASSWORD ?? e.SMTP_PASS;
  // nodemailer would otherwise try to log in with an empty password and every email would fail later.
  if (e.SMTP_USER && !smtpPassword) {
    problems.push('SMTP_USER is set but SMTP_PASSWORD is not: set both (or neither, for no SMTP login)');
  }
  if (!e.SMTP_USER && smtpPassword) {
    problems.push('SMTP_PASSWORD is set but SMTP_USER is not: set both (or neither, for no SMTP login)');
  }
  if ((e.SOCIAL_CLIENT_ID === undefined) !== (e.SOCIAL_CLIENT_SECRET === undefined)) {
    problems.push('SOCIAL_CLIENT_ID and SOCIAL_CLIENT_SECRET must be set together');
  }
  if (e.SOCIAL_CLIENT_ID && !BUILT_IN_SOCIAL_PROVIDERS.has(e.SOCIAL_PROVIDER) && !e.SOCIAL_ISSUER) {
    problems.push(
      `SOCIAL_ISSUER: required for the generic OpenID Connect provider "${e.SOCIAL_PROVIDER}" (well-known providers: ${[...BUILT_IN_SOCIAL_PROVIDERS].join(', ')})`,
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const apiBaseUrl = (e.API_BASE_URL ?? `http://localhost:${e.PORT || 3001}`).replace(/\/+$/, '');
  // Served by this service, the web app's pages (which email links point at) are at the service's own URL.
  const fe = (feBaseUrl ?? (e.SERVE_WEB_APP ? apiBaseUrl : 'http://localhost:3000')).replace(/\/+$/, '');
  const { FRONTEND_URL: _alias, SMTP_PASS: _smtpAlias, ...rest } = e;
  const corsOrigins = origins.length > 0 ? [...new Set(origins)] : [new URL(fe).origin];
  return {
    ...rest,
    SMTP_PASSWORD: smtpPassword,
    warnings: unknownVariableWarnings(env),
    isProduction,
    API_BASE_URL: apiBaseUrl,
    FE_BASE_URL: fe,
    // An empty allowlist in development would make the bundled web app unusable; default to the front end.
    CORS_ALLOWLISTED_ORIGINS: corsOrigins,
    trustedOrigins: withLoopbackAliases(
      [...corsOrigins, new URL(fe).origin, new URL(apiBaseUrl).origin],
      !isProduction,
    ),
    corsOrigins: withLoopbackAliases(corsOrigins, !isProduction),
    INSTANCE_ID: sanitizeInstanceId(e.INSTANCE_ID ?? `api-${randomUUID()}`),
    AUTH_SECRET: e.AUTH_SECRET ?? developmentSecret(e.DATA_DIR),
    distributed: Boolean(e.CACHE_URL) && e.ENABLE_DISTRIBUTED_CHAT,
  };
}

// ---- Trusted origins -----------------------------------------------------------------------------------------

const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]'];

/**
 * The origins, deduplicated; in development each loopback origin also under the other loopback names
 * (`http://localhost:3001` ⇔ `http://127.0.0.1:3001` ⇔ `http://[::1]:3001`): the same service opened at another
 * spelling of the same address is not another site, and refusing it gave "Invalid origin" on sign-in and a chat
 * that reconnected forever. Production trusts exactly what is configured.
 */
export function withLoopbackAliases(origins: string[], development: boolean): string[] {
  const out = new Set(origins);
  if (development) {
    for (const origin of origins) {
      const url = new URL(origin);
      if (!LOOPBACK_HOSTS.includes(url.hostname)) continue;
      for (const host of LOOPBACK_HOSTS) {
        url.hostname = host;
        out.add(url.origin);
      }
    }
  }
  return [...out];
}

// ---- Misspelt variables ---------------------------------------------------------------------------------------

/** Read outside the schema (the CLI's password) but still Herald's, so never reported as unknown. */
const OTHER_KNOWN_VARIABLES = ['HERALD_ADMIN_PASSWORD'];

/**
 * Prefixes only Herald's variables use: an unknown name with one of them is almost certainly a mistake (a
 * misspelling or another project's spelling, like CORS_ALLOWED_ORIGINS). NODE_, API_ and the like are left out:
 * other tools legitimately set variables with them.
 */
const HERALD_PREFIXES = [
  'SMTP_',
  'CACHE_',
  'CORS_',
  'DATABASE_',
  'AUTH_',
  'SOCIAL_',
  'CHAT_',
  'SSE_',
  'EMAIL_',
  'WEBHOOK_',
  'RETENTION_',
  'SHUTDOWN_',
  'METRICS_',
  'ADMIN_',
  'BROADCAST_',
  'HEARTBEAT_',
  'PRESENCE_',
  'REGISTRY_',
  'DEDUP_',
  'BUS_',
  'WS_',
  'COOKIE_',
  'HERALD_',
  'WEBHOOK_',
];

/** Optimal string alignment distance: Levenshtein plus adjacent transpositions (DATABSE → DATABASE is 1). */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number) => d[i]?.[j] ?? Number.POSITIVE_INFINITY;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, at(i - 2, j - 2) + 1);
      const row = d[i];
      if (row) row[j] = v;
    }
  }
  return at(a.length, b.length);
}

/**
 * Warnings for environment variables that look like Herald's but are not (they would be silently ignored):
 * close in spelling to a known name, a known name in the wrong case, or carrying a prefix only Herald uses.
 */
export function unknownVariableWarnings(env: Record<string, string | undefined>): string[] {
  const known = [...Object.keys(EnvSchema.shape), ...OTHER_KNOWN_VARIABLES];
  const knownSet = new Set(known);
  const warnings: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (knownSet.has(name)) continue;
    const upper = name.toUpperCase();
    if (knownSet.has(upper)) {
      warnings.push(`${name} is ignored: variable names are case-sensitive; did you mean ${upper}?`);
      continue;
    }
    // Lower-case names (npm_config_*, npm_package_*) belong to other tools.
    if (!/^[A-Z][A-Z0-9_]*$/.test(name)) continue;
    let best: { name: string; distance: number } | undefined;
    for (const candidate of known) {
      const distance = editDistance(name, candidate);
      if (!best || distance < best.distance) best = { name: candidate, distance };
    }
    // Short names get less slack, so HOME is not taken for HOST.
    const slack = name.length >= 8 ? 2 : name.length >= 4 ? 1 : 0;
    const prefix = HERALD_PREFIXES.find((p) => name.startsWith(p));
    if (best && best.distance <= slack) {
      warnings.push(`${name} is not a Herald variable and is ignored; did you mean ${best.name}?`);
    } else if (prefix) {
      const sameFamily = known.filter((k) => k.startsWith(prefix));
      const closest = (sameFamily.length > 0 ? sameFamily : known).reduce((a, b) =>
        editDistance(name, a) <= editDistance(name, b) ? a : b,
      );
      warnings.push(`${name} is not a Herald variable and is ignored; did you mean ${closest}?`);
    }
  }
  return warnings;
}

// ---- Start-up summary -----------------------------------------------------------------------------------------

/** host[:port]/database of a connection URL: never the user's password (nor the user, which helps guessing). */
function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    const db = u.pathname.replace(/^\/+/, '');
    return `${u.protocol.replace(/:$/, '')} ${u.host}${db ? `/${db}` : ''}`;
  } catch {
    return 'configured (unparsable URL)';
  }
}

export interface StartupSummary {
  /** The address to open in a browser (the bundled web app), or null when the service serves no app. */
  open: string | null;
  database: string;
  store: string;
  mail: string;
  corsOrigins: string[];
  apiReference: string;
}

/** What an operator needs to see once at start-up; built from Config only, so no secret can leak into it. */
export function startupSummary(config: Config): { summary: StartupSummary; line: string } {
  const database = config.DATABASE_URL
    ? describeUrl(config.DATABASE_URL)
    : `embedded PGlite at ${path.resolve(config.DATA_DIR, 'pglite')}`;
  const store = config.CACHE_URL
    ? `${config.CACHE_URL.split(',')
        .map((u) => describeUrl(u.trim()))
        .join(', ')}${config.distributed ? '' : ' (distributed mode off)'}`
    : 'embedded (in-process, single instance)';
  const mail = config.SMTP_HOST
    ? `smtp ${config.SMTP_HOST}:${config.SMTP_PORT}`
    : config.isProduction
      ? 'disabled (SMTP_HOST not set)'
      : 'log (SMTP_HOST not set: emails are written to the log)';
  const summary: StartupSummary = {
    open: config.SERVE_WEB_APP ? config.FE_BASE_URL : null,
    database,
    store,
    mail,
    corsOrigins: config.CORS_ALLOWLISTED_ORIGINS,
    apiReference: `${config.API_BASE_URL}/docs`,
  };
  const line =
    `${summary.open ? `Herald ready: open ${summary.open} in a browser; ` : 'Herald ready: '}database ${summary.database}; store ${summary.store}; mail ${summary.mail}; ` +
    `CORS ${summary.corsOrigins.join(', ')}; API reference ${summary.apiReference}`;
  return { summary, line };
}
