// The per-app dependency container (`app.ctx`): its own module so features and ops can name it without
// importing the composition root.
import type { FastifyInstance } from 'fastify';
import type { ApiKeyService } from './api-keys/index.js';
import type { Auth } from './auth/auth.js';
import type { SessionResolver } from './auth/guard.js';
import type { Revocation } from './auth/revocation.js';
import type { GetSessionFastPath } from './auth/session-read.js';
import type { Config } from './config.js';
import type { Email } from './email/index.js';
import type { EventOutbox } from './events/outbox.js';
import type { ClientLimits } from './http/client-limits.js';
import type { CutShort } from './http/drain.js';
import type { OverloadMonitor } from './http/overload.js';
import type { Database } from './infra/db.js';
import type { EmailOutbox } from './infra/email-outbox.js';
import type { Housekeeping } from './infra/housekeeping.js';
import type { Logger } from './infra/logger.js';
import type { Mailer } from './infra/mailer.js';
import type { Store } from './infra/store.js';
import type { NotificationService } from './notifications/index.js';
import type { StreamHub } from './notifications/stream-hub.js';
import type { Lifecycle } from './ops/lifecycle.js';
import type { HeraldMetrics } from './ops/prometheus.js';
import type { Push } from './push/index.js';
import type { Realtime } from './realtime/index.js';
import type { Webhooks } from './webhooks/index.js';

export interface AppContext {
  config: Config;
  logger: Logger;
  database: Database;
  store: Store;
  mailer: Mailer;
  /** The durable email queue every feature sends through. */
  outbox: EmailOutbox;
  /** Email rendering, unsubscribe tokens, notification emails and digests (email/). */
  email: Email;
  realtime: Realtime;
  auth: Auth;
  sessions: SessionResolver;
  /** `GET /auth/get-session` answered from the session caches when that equals better-auth's answer. */
  sessionRead: GetSessionFastPath;
  /**
   * Revocation convergence (auth/revocation.ts): `revocation.isSessionLive(userId, sessionId)` for live
   * connections, durable repair of auth store writes lost to an outage.
   */
  revocation: Revocation;
  lifecycle: Lifecycle;
  /** The domain-event port: writers call `events.write(tx, …)` in the transaction of the change (events/). */
  events: EventOutbox;
  /** Outgoing webhooks: a consumer of `events`; the worker sends what it queued (webhooks/). */
  webhooks: Webhooks;
  /** Web Push (push/): the `push` delivery strategy, its durable queue's worker and the subscriptions. */
  push: Push;
  /** This app's Prometheus registry and the histograms the hot paths observe into (ops/prometheus.ts). */
  metrics: HeraldMetrics;
  /** Overload protection (http/overload.ts): health reports it, the guard refuses requests while it holds. */
  overload: OverloadMonitor;
  /**
   * The shutdown request drain (http/drain.ts), as long-running request work sees it: `drain.signal` aborts and
   * `drain.onCutShort(release)` runs when SHUTDOWN_GRACE_MS ends with the request still running.
   */
  drain: CutShort;

  /** Per-client limits (http/client-limits.ts), ahead of the overload guard. */
  clientLimits: ClientLimits;
  /** The shared housekeeping scheduler (infra/housekeeping.ts) with every owner's task registered. */
  housekeeping: Housekeeping;
}

/**
 * The built app: a Fastify instance plus, for the entry point and tests only, what was wired into it. Features
 * never see these properties (they get a plain FastifyInstance and their declared dependencies).
 */
export type App = FastifyInstance & {
  readonly ctx: AppContext;
  readonly notifications: NotificationService;
  readonly notificationStreams: StreamHub;
  readonly apiKeys: ApiKeyService;
};
