// Owns the one environment schema. Everything else receives a typed Config; nothing else reads process.env (but
// cli.ts's create-admin password, HERALD_ADMIN_PASSWORD, a secret of that command and not configuration).
import { createECDH, generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { sanitizeInstanceId } from './infra/instance-id.js';

// TRUST_PROXY and Origin value rules: config validates them here, and Fastify, the request guards and the chat
// upgrade (http/proxy.ts) apply them.
export type TrustProxy = boolean | string[] | ((address: string, hop: number) => boolean);

/** TRUST_PROXY: unset/false (socket address), true, a hop count, or a comma-separated list of proxy addresses/CIDRs. */
export function parseTrustProxy(value: string | undefined): TrustProxy {
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return true;
  if (/^\d+$/.test(value)) {
    const hops = Number(value);
    return (_address, hop) => hop < hops;
  }
  return value.split(',').map((v) => v.trim());
}

/** True when TRUST_PROXY is in one of the forms parseTrustProxy accepts (checked by config). */
export function isTrustProxy(value: string): boolean {
  if (['true', 'false'].includes(value) || /^\d+$/.test(value)) return true;
  return value
    .split(',')
    .map((v) => v.trim())
    .every((v) => /^[0-9a-fA-F:.]+(\/\d{1,3})?$/.test(v) && (v.includes('.') || v.includes(':')));
}

/**
 * Browsers send `Origin` as scheme://host[:port], host lowercased, default port dropped; allowlist entries are
 * reduced to that form so a trailing slash or capitals cannot silently break CORS (or differ from the WebSocket
 * check). Anything that is not a bare http(s) origin is undefined (a configuration error).
 */
export function normalizeOrigin(entry: string): string | undefined {
  try {
    const u = new URL(entry);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
    if (u.username || u.password || u.pathname !== '/' || u.search || u.hash) return undefined;
    return u.origin;
  } catch {
    return undefined;
  }
}

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

/** The variables production requires (the contract's list); a CLI command asks only for those it uses. */
export const PRODUCTION_REQUIRED = [
  'DATABASE_URL',
  'CACHE_URL',
  'AUTH_SECRET',
  'API_BASE_URL',
  'FE_BASE_URL',
] as const;
export type ProductionRequired = (typeof PRODUCTION_REQUIRED)[number];

export interface LoadConfigOptions {
  /** Required when NODE_ENV=production (default: all of PRODUCTION_REQUIRED, what the server needs). */
  required?: readonly ProductionRequired[];
}

/** Checks that need only the raw environment, so they are reported even when other variables are invalid. */
function rawProblems(
  env: Record<string, string | undefined>,
  required: readonly ProductionRequired[],
): string[] {
  const problems: string[] = [];
  const has = (name: string) => (env[name] ?? '').trim() !== '';
  if ((env.NODE_ENV ?? '').trim() === 'production') {
    for (const name of required) {
      if (name === 'FE_BASE_URL') {
        if (!has('FE_BASE_URL') && !has('FRONTEND_URL')) {
          problems.push('FE_BASE_URL: required when NODE_ENV=production (or its alias FRONTEND_URL)');
        }
      } else if (!has(name)) problems.push(`${name}: required when NODE_ENV=production`);
    }
  }
  return problems;
}

/** An enum variable where an empty value means unset (as .env files leave them). */
const optionalEnum = <T extends readonly [string, ...string[]]>(values: T) =>
  z
    .string()
    .trim()
    .toLowerCase()
    .optional()
    .transform((v) => (v === undefined || v === '' ? undefined : v))
    .pipe(z.enum(values).optional());

const OTLP_PROTOCOLS = ['http/protobuf', 'http/json', 'grpc'] as const;
const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

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
  // The PostgreSQL server itself when DATABASE_URL is a pooler (PgBouncer, transaction mode): migrations use it.
  DATABASE_DIRECT_URL: optionalString.refine((v) => v === undefined || /^postgres(ql)?:\/\//.test(v), {
    message: 'DATABASE_DIRECT_URL must start with postgres:// or postgresql://',
  }),
  // Streaming replicas (comma-separated) for notification lists and counts, chat history and room lists, with
  // read-your-writes.
  DATABASE_READ_URL: list.refine((urls) => urls.every((u) => /^postgres(ql)?:\/\//.test(u)), {
    message: 'DATABASE_READ_URL must be a comma-separated list of postgres:// or postgresql:// URLs',
  }),
  // A replica that has fallen further behind the primary than this stops serving reads until it catches up.
  DATABASE_READ_MAX_LAG_MS: int(2_000, 10, 60_000),
  // How often each instance reads every replica's replay position (and the primary's WAL position).
  DATABASE_READ_POLL_MS: int(100, 10, 10_000),
  // Connections per pool: the primary's pool, and each replica's.
  DATABASE_POOL_SIZE: int(10, 1, 1_000),
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
  // Sender; without a display name (or unset) APP_NAME is used as one (`"<APP_NAME>" <no-reply@localhost>`).
  SMTP_FROM: optionalString,
  // Email branding and rendering (docs/email.md): the product name in every subject, body and sender name.
  APP_NAME: optionalString.default('Herald').refine((v) => v.length <= 60 && !/[\p{Cc}<>"]/u.test(v), {
    message: 'APP_NAME must be at most 60 characters, without control characters, <, > or "',
  }),
  EMAIL_LOGO_URL: httpUrl('EMAIL_LOGO_URL'),
  EMAIL_ACCENT_COLOR: optionalString
    .default('#4f46e5')
    .refine((v) => /^#(?:[0-9a-f]{3}|[0-9a-f]{6})$/i.test(v), {
      message: 'EMAIL_ACCENT_COLOR must be a hex colour, #rgb or #rrggbb',
    }),
  // Operator overrides of the email templates: files named as in docs/email.md; checked at start-up.
  EMAIL_TEMPLATES_DIR: optionalString,
  // Locale of users who have none (BCP 47; emails exist in en and de, others fall back to en).
  DEFAULT_LOCALE: optionalString.default('en'),
  // Digest windows (CONTRACT §12): one digest per user per window of this length.
  EMAIL_DIGEST_HOURLY_MS: int(3_600_000, 100),
  EMAIL_DIGEST_DAILY_MS: int(86_400_000, 100),
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
  // Batch statements of one broadcast written at once (each on its own pooled connection).
  BROADCAST_WRITE_CONCURRENCY: int(2, 1, 16),
  // A send to more users than this is accepted at once (202) and runs in the background (CONTRACT §5).
  BROADCAST_ASYNC_THRESHOLD: int(10_000, 0, 100_000_000),
  // How often each instance looks for asynchronous sends to run (queued, or abandoned by a dead instance).
  BROADCAST_QUEUE_POLL_MS: int(1_000, 20, 60_000),
  BODY_LIMIT_BYTES: int(64 * 1024, 1024, 10 * 1024 * 1024),
  // Slow-client limits (Node's HTTP server): the whole request (headers + body) must arrive within
  // HTTP_REQUEST_TIMEOUT_MS, the headers within HTTP_HEADERS_TIMEOUT_MS; an idle keep-alive connection is closed
  // after HTTP_KEEP_ALIVE_TIMEOUT_MS. None of them limits a response, so SSE streams and WebSockets live on.
  HTTP_REQUEST_TIMEOUT_MS: int(30_000, 100, 10 * 60_000),
  HTTP_HEADERS_TIMEOUT_MS: int(10_000, 100, 10 * 60_000),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: int(72_000, 100, 10 * 60_000),
  // Open TCP connections per client address (socket address, also behind a proxy); 0 turns the cap off.
  HTTP_MAX_CONNECTIONS_PER_IP: int(256, 0),
  // Per-client limits ahead of the overload guard (http/client-limits.ts); 0 turns one off. In flight: per
  // instance (in memory). Per second: counted in the shared store across instances (per instance while it is down).
  CLIENT_MAX_IN_FLIGHT: int(32, 0),
  CLIENT_MAX_IN_FLIGHT_PER_IP: int(128, 0),
  CLIENT_RATE_LIMIT_PER_SECOND: int(100, 0),
  CLIENT_RATE_LIMIT_PER_SECOND_PER_IP: int(300, 0),
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
  // Bound on the shutdown sequence besides SHUTDOWN_GRACE_MS (the process exits at the latest after both).
  SHUTDOWN_TIMEOUT_MS: int(10_000, 100),
  // How long requests already received may run on after SIGTERM before they are answered 503 UNAVAILABLE.
  SHUTDOWN_GRACE_MS: int(10_000, 0, 600_000),
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
  // Under load, the least time between two flushes of chat fan-out writes, so frames of several messages to one
  // socket share a write (each waits at most this long); 0 (default) flushes every event-loop turn. Off by default:
  // on the 2-core bench it bought CPU with latency at 100 msg/s (docs/performance.md, "Chat fan-out coalescing").
  CHAT_COALESCE_MS: int(0, 0, 50),
  // Rooms (§6.1): rooms one user belongs to (general not counted), members of a private room, rooms one user
  // may create per hour, and the window in which chat notifies a recipient at most once per room.
  CHAT_MAX_ROOMS_PER_USER: int(500, 1),
  CHAT_MAX_PRIVATE_ROOM_MEMBERS: int(1000, 2),
  CHAT_ROOM_CREATES_PER_HOUR: int(20, 1),
  CHAT_NOTIFY_FOLD_MS: int(5 * 60 * 1000, 100),
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
  // ---- Web Push (server/src/push; docs/architecture.md "Web Push") ----
  // The VAPID key pair (base64url: the 65-byte uncompressed P-256 public key and the 32-byte private scalar) and
  // the contact (mailto: or https:). In production push is on only when all three are set; in development and
  // tests a pair is generated into DATA_DIR when neither key is set.
  VAPID_PUBLIC_KEY: optionalString,
  VAPID_PRIVATE_KEY: optionalString,
  VAPID_SUBJECT: optionalString.refine((v) => v === undefined || /^(mailto:.+|https:\/\/.+)/.test(v), {
    message: 'VAPID_SUBJECT must be a mailto: address or an https: URL',
  }),
  // The TTL header of every push message (how long the push service keeps it for an offline browser); retries
  // stop once a message is older than this.
  PUSH_TTL_SECONDS: int(86_400, 0, 28 * 86_400),
  // Push endpoints resolving to private, loopback or link-local addresses (and http endpoints) are refused unless
  // this is true (development, tests).
  PUSH_ALLOW_PRIVATE_ENDPOINTS: bool(false),
  // Concurrent push requests on one instance, in total and per push service (origin): a slow push service holds
  // at most PUSH_CONCURRENCY_PER_SERVICE of them, so the others keep flowing.
  PUSH_CONCURRENCY: int(64, 1, 1000),
  PUSH_CONCURRENCY_PER_SERVICE: int(48, 1, 1000),
  // Per request: the push service must answer within this.
  PUSH_TIMEOUT_MS: int(10_000, 50, 120_000),
  // How often each instance looks for due push messages (messages queued on the same instance go out at once).
  PUSH_QUEUE_POLL_MS: int(1_000, 20),
  // First retry delay after a 429/5xx/network error; doubles per attempt (full jitter, capped at 1 h), and never
  // shorter than the push service's Retry-After.
  PUSH_RETRY_BASE_MS: int(5_000, 10),
  // Subscriptions (browsers) per user; subscribing one more removes the least recently subscribed.
  PUSH_MAX_SUBSCRIPTIONS_PER_USER: int(20, 1, 1000),
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
  // The access log (one "request completed" line at info per request) of the polled read routes (GET /health,
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
  // Start-up (ops/startup-wait.ts): how long DATABASE_URL and CACHE_URL are retried before giving up (exit 1); an
  // orchestrator may start Herald before its database. 0: one attempt each.
  STARTUP_WAIT_MS: int(60_000, 0, 24 * 3_600_000),
  // OpenTelemetry tracing (ops/telemetry.ts), the specification's names. Off unless OTEL_TRACES_EXPORTER or an
  // OTLP endpoint is set; OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off whatever else is set.
  OTEL_SDK_DISABLED: bool(false),
  OTEL_TRACES_EXPORTER: optionalEnum(['otlp', 'console', 'none']),
  OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl('OTEL_EXPORTER_OTLP_ENDPOINT'),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: httpUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'),
  OTEL_EXPORTER_OTLP_PROTOCOL: optionalEnum(OTLP_PROTOCOLS),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: optionalEnum(OTLP_PROTOCOLS),
  OTEL_EXPORTER_OTLP_HEADERS: optionalString,
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: optionalString,
  OTEL_SERVICE_NAME: optionalString.default('herald'),
  OTEL_RESOURCE_ATTRIBUTES: optionalString,
  OTEL_TRACES_SAMPLER: optionalEnum(SAMPLERS),
  OTEL_TRACES_SAMPLER_ARG: optionalString,
  // Delay between two batch exports of finished spans (the specification's default; tests shorten it).
  OTEL_BSP_SCHEDULE_DELAY: int(5_000, 1, 3_600_000),
});

/** What ops/telemetry.ts needs to start tracing; null when tracing is off. */
export interface TracingConfig {
  exporter: 'otlp' | 'console';
  /** Full URL traces are POSTed to (…/v1/traces). */
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  headers: Record<string, string>;
  serviceName: string;
  resourceAttributes: Record<string, string>;
  sampler: (typeof SAMPLERS)[number];
  /** traceidratio's ratio, 0..1. */
  samplerRatio: number;
  /** Delay between batch exports (OTEL_BSP_SCHEDULE_DELAY). */
  exportDelayMs: number;
}

/** `key=value,key2=value2` (OTEL_EXPORTER_OTLP_HEADERS, OTEL_RESOURCE_ATTRIBUTES), values percent-decoded. */
function parseKeyValues(name: string, value: string | undefined, problems: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  if (!value) return out;
  for (const pair of value.split(',')) {
    if (pair.trim() === '') continue;
    const eq = pair.indexOf('=');
    const key = eq > 0 ? pair.slice(0, eq).trim() : '';
    if (!key) {
      // Never echo the pair: headers carry API keys.
      problems.push(`${name}: expected key=value pairs separated by commas`);
      return out;
    }
    try {
      out[key] = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      problems.push(`${name}: the value of "${key}" is not valid percent-encoding`);
    }
  }
  return out;
}

function tracingConfig(e: ParsedEnv, problems: string[]): TracingConfig | null {
  const exporter = e.OTEL_TRACES_EXPORTER;
  const wanted =
    exporter !== undefined ||
    e.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined ||
    e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined;
  if (e.OTEL_SDK_DISABLED || exporter === 'none' || !wanted) return null;
  const protocol = e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf';
  if (protocol === 'grpc') {
    problems.push(
      'OTEL_EXPORTER_OTLP_PROTOCOL: grpc is not supported; use http/protobuf (the default) or http/json',
    );
  }
  let ratio = 1;
  if (e.OTEL_TRACES_SAMPLER_ARG !== undefined) {
    ratio = Number(e.OTEL_TRACES_SAMPLER_ARG);
    if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
      problems.push(
        `OTEL_TRACES_SAMPLER_ARG: expected a ratio between 0 and 1, got "${e.OTEL_TRACES_SAMPLER_ARG}"`,
      );
    }
  }
  // The specification's default endpoint is the local collector's OTLP/HTTP port.
  const base = (e.OTEL_EXPORTER_OTLP_ENDPOINT ?? 'http://localhost:4318').replace(/\/+$/, '');
  return {
    exporter: exporter === 'console' ? 'console' : 'otlp',
    url: e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? `${base}/v1/traces`,
    protocol: protocol === 'http/json' ? 'http/json' : 'http/protobuf',
    headers: {
      ...parseKeyValues('OTEL_EXPORTER_OTLP_HEADERS', e.OTEL_EXPORTER_OTLP_HEADERS, problems),
      ...parseKeyValues('OTEL_EXPORTER_OTLP_TRACES_HEADERS', e.OTEL_EXPORTER_OTLP_TRACES_HEADERS, problems),
    },
    serviceName: e.OTEL_SERVICE_NAME,
    resourceAttributes: parseKeyValues('OTEL_RESOURCE_ATTRIBUTES', e.OTEL_RESOURCE_ATTRIBUTES, problems),
    sampler: e.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on',
    samplerRatio: ratio,
    exportDelayMs: e.OTEL_BSP_SCHEDULE_DELAY,
  };
}

export type Env = z.input<typeof EnvSchema>;
type ParsedEnv = z.output<typeof EnvSchema>;

export interface Config
  extends Omit<ParsedEnv, 'FRONTEND_URL' | 'INSTANCE_ID' | 'AUTH_SECRET' | 'SMTP_PASS' | 'SMTP_FROM'> {
  /** Always with a display name (APP_NAME when SMTP_FROM gives none). */
  SMTP_FROM: string;
  isProduction: boolean;
  /** Non-fatal findings (likely misspelt variables), logged once at start-up. */
  warnings: string[];
  INSTANCE_ID: string;
  AUTH_SECRET: string;
  API_BASE_URL: string;
  FE_BASE_URL: string;
  /** True only when a store is configured and ENABLE_DISTRIBUTED_CHAT is on. */
  distributed: boolean;
  /** The VAPID keys and subject when Web Push is on (all three set, or generated in development); else null. */
  vapid: VapidConfig | null;
  /** OpenTelemetry tracing settings derived from OTEL_*; null when tracing is off. */
  tracing: TracingConfig | null;
  /**
   * The one list of origins a browser may act from (better-auth's trustedOrigins, the request guards, the chat
   * socket's Origin check, CORS): CORS_ALLOWLISTED_ORIGINS, the front end and the service itself, and in development
   * each loopback origin under its other loopback names too (trustedOriginsOf).
   */
  trustedOrigins: string[];
  /** Origins CORS answers: CORS_ALLOWLISTED_ORIGINS, in development with their loopback aliases. */
  corsOrigins: string[];
}

export interface VapidConfig {
  /** base64url, 65-byte uncompressed P-256 point (the browser's applicationServerKey). */
  publicKey: string;
  /** base64url, 32 bytes. */
  privateKey: string;
  subject: string;
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

const VAPID_FILE = 'vapid-keys.json';

/** A fresh VAPID key pair (P-256) in the base64url forms browsers and the Web Push library take. */
export function generateVapidKeys(): { publicKey: string; privateKey: string } {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const pub = publicKey.export({ format: 'jwk' });
  const priv = privateKey.export({ format: 'jwk' });
  const x = Buffer.from(String(pub.x), 'base64url');
  const y = Buffer.from(String(pub.y), 'base64url');
  return {
    publicKey: Buffer.concat([Buffer.from([4]), x, y]).toString('base64url'),
    privateKey: String(priv.d),
  };
}

/**
 * In development (and tests) the VAPID pair is generated once and kept under DATA_DIR, like the auth secret, so
 * browsers subscribed with it keep working across restarts. Written by link(2) from a temporary file: instances
 * starting together all end up with the one pair that won.
 */
function developmentVapidKeys(dataDir: string): { publicKey: string; privateKey: string } {
  const file = path.join(dataDir, VAPID_FILE);
  const read = () => {
    const stored = JSON.parse(readFileSync(file, 'utf8')) as { publicKey?: unknown; privateKey?: unknown };
    if (typeof stored.publicKey !== 'string' || typeof stored.privateKey !== 'string') return null;
    return vapidKeyProblems(stored.publicKey, stored.privateKey).length === 0
      ? { publicKey: stored.publicKey, privateKey: stored.privateKey }
      : null;
  };
  if (existsSync(file)) {
    const stored = read();
    if (stored) return stored;
    unlinkSync(file);
  }
  mkdirSync(dataDir, { recursive: true });
  const keys = generateVapidKeys();
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writeFileSync(tmp, JSON.stringify(keys), { mode: 0o600 });
  try {
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    unlinkSync(tmp);
  }
  return read() ?? keys;
}

/** Shape of a VAPID pair, and that the public key is the private key's (a pasted mismatch fails every send). */
function vapidKeyProblems(publicKey: string, privateKey: string): string[] {
  const b64url = /^[A-Za-z0-9_-]+={0,2}$/;
  const pub = b64url.test(publicKey) ? Buffer.from(publicKey, 'base64url') : Buffer.alloc(0);
  const priv = b64url.test(privateKey) ? Buffer.from(privateKey, 'base64url') : Buffer.alloc(0);
  const problems: string[] = [];
  if (pub.length !== 65 || pub[0] !== 4)
    problems.push('VAPID_PUBLIC_KEY must be a base64url uncompressed P-256 public key (65 bytes)');
  if (priv.length !== 32) problems.push('VAPID_PRIVATE_KEY must be a base64url P-256 private key (32 bytes)');
  if (problems.length > 0) return problems;
  try {
    const ecdh = createECDH('prime256v1');
    ecdh.setPrivateKey(priv);
    if (!ecdh.getPublicKey().equals(pub))
      problems.push('VAPID_PUBLIC_KEY and VAPID_PRIVATE_KEY are not one key pair');
  } catch {
    problems.push('VAPID_PRIVATE_KEY is not a valid P-256 private key');
  }
  return problems;
}

/** The Web Push keys: all three given, generated (development), or off (null); problems name the variables. */
function vapidConfig(
  e: { VAPID_PUBLIC_KEY?: string; VAPID_PRIVATE_KEY?: string; VAPID_SUBJECT?: string; DATA_DIR: string },
  isProduction: boolean,
  problems: string[],
): VapidConfig | null {
  const given = {
    VAPID_PUBLIC_KEY: e.VAPID_PUBLIC_KEY,
    VAPID_PRIVATE_KEY: e.VAPID_PRIVATE_KEY,
    VAPID_SUBJECT: e.VAPID_SUBJECT,
  };
  const missing = Object.entries(given)
    .filter(([, v]) => v === undefined)
    .map(([k]) => k);
  const subject = e.VAPID_SUBJECT ?? 'mailto:push@localhost';
  if (missing.length === 0 || (!isProduction && e.VAPID_PUBLIC_KEY && e.VAPID_PRIVATE_KEY)) {
    const pub = e.VAPID_PUBLIC_KEY as string;
    const priv = e.VAPID_PRIVATE_KEY as string;
    const keyProblems = vapidKeyProblems(pub, priv);
    problems.push(...keyProblems);
    return keyProblems.length === 0 ? { publicKey: pub, privateKey: priv, subject } : null;
  }
  if (isProduction) {
    if (missing.length < 3) {
      problems.push(
        `Web Push needs VAPID_PUBLIC_KEY, VAPID_PRIVATE_KEY and VAPID_SUBJECT together: missing ${missing.join(', ')} (unset all three to turn push off)`,
      );
    }
    return null;
  }
  if (e.VAPID_PUBLIC_KEY || e.VAPID_PRIVATE_KEY) {
    problems.push(
      'VAPID_PUBLIC_KEY and VAPID_PRIVATE_KEY must be set together (or neither, to generate a pair)',
    );
    return null;
  }
  return { ...developmentVapidKeys(e.DATA_DIR), subject };
}

export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  options: LoadConfigOptions = {},
): Config {
  const required = options.required ?? PRODUCTION_REQUIRED;
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const missing = rawProblems(env, required).filter(
      (p) => !parsed.error.issues.some((i) => p.startsWith(`${String(i.path[0])}:`)),
    );
    throw new ConfigError([
      ...parsed.error.issues.map((issue) => `${issue.path.join('.') || 'environment'}: ${issue.message}`),
      ...missing,
    ]);
  }
  const e = parsed.data;
  const problems: string[] = rawProblems(env, required);
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
  if (!e.DATABASE_URL && (e.DATABASE_DIRECT_URL || e.DATABASE_READ_URL.length > 0)) {
    problems.push(
      'DATABASE_DIRECT_URL and DATABASE_READ_URL need DATABASE_URL (the embedded database has no pooler or replicas)',
    );
  }
  if (e.DATABASE_READ_MAX_LAG_MS < e.DATABASE_READ_POLL_MS) {
    problems.push(
      'DATABASE_READ_MAX_LAG_MS must be at least DATABASE_READ_POLL_MS (lag is measured at each poll)',
    );
  }
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
  const defaultLocale = normalizeLocale(e.DEFAULT_LOCALE);
  if (defaultLocale === null) {
    problems.push(`DEFAULT_LOCALE: "${e.DEFAULT_LOCALE}" is not a BCP 47 language tag (e.g. en, de, de-AT)`);
  }
  const smtpFrom = senderWithName(e.SMTP_FROM, e.APP_NAME);
  if (smtpFrom === null) {
    problems.push('SMTP_FROM must be an address (no-reply@example.com) or "Name <no-reply@example.com>"');
  }

  const vapid = vapidConfig(e, isProduction, problems);

  const tracing = tracingConfig(e, problems);
  if (problems.length > 0) throw new ConfigError(problems);

  const apiBaseUrl = (e.API_BASE_URL ?? `http://localhost:${e.PORT || 3001}`).replace(/\/+$/, '');
  // Served by this service, the web app's pages (which email links point at) are at the service's own URL.
  const fe = (feBaseUrl ?? (e.SERVE_WEB_APP ? apiBaseUrl : 'http://localhost:3000')).replace(/\/+$/, '');
  const { FRONTEND_URL: _alias, SMTP_PASS: _smtpAlias, ...rest } = e;
  const corsOrigins = origins.length > 0 ? [...new Set(origins)] : [new URL(fe).origin];
  return {
    ...rest,
    SMTP_PASSWORD: smtpPassword,
    SMTP_FROM: smtpFrom ?? '',
    DEFAULT_LOCALE: defaultLocale ?? 'en',
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
    // In production AUTH_SECRET is unset only for a CLI command that signs nothing: a throwaway secret then,
    // never a file written next to a production deployment.
    AUTH_SECRET:
      e.AUTH_SECRET ?? (isProduction ? randomBytes(32).toString('base64url') : developmentSecret(e.DATA_DIR)),
    distributed: Boolean(e.CACHE_URL) && e.ENABLE_DISTRIBUTED_CHAT,
    vapid,

    tracing,
  };
}

/**
 * A BCP 47 tag in canonical case (`de-at` → `de-AT`), or null when it is not one. Kept here (the lowest floor) so
 * config and the email feature share one rule.
 */
export function normalizeLocale(tag: string): string | null {
  if (tag.length === 0 || tag.length > 35 || !/^[A-Za-z]{2,8}(?:[-_][A-Za-z0-9]{1,8})*$/.test(tag))
    return null;
  try {
    return Intl.getCanonicalLocales(tag.replace(/_/g, '-'))[0] ?? null;
  } catch {
    return null;
  }
}

/** SMTP_FROM with a display name: APP_NAME when it has none; null when it is not an address at all. */
function senderWithName(from: string | undefined, appName: string): string | null {
  const quoted = `"${appName.replace(/["\\]/g, '')}"`;
  if (from === undefined) return `${quoted} <no-reply@localhost>`;
  if (/[\r\n]/.test(from)) return null;
  const named = /^(.*)<([^<>\s]+@[^<>\s]+)>$/.exec(from.trim());
  if (named) return named[1]?.trim() ? from.trim() : `${quoted} <${named[2]}>`;
  return /^[^<>\s"]+@[^<>\s"]+$/.test(from.trim()) ? `${quoted} <${from.trim()}>` : null;
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
  'PUSH_',
  'VAPID_',
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
