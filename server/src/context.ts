// The per-app dependency container (`app.ctx`): its own module so features and ops can name it without
// importing the composition root.
import type { Auth } from './auth/auth.js';
import type { SessionResolver } from './auth/guard.js';
import type { Revocation } from './auth/revocation.js';
import type { Config } from './config.js';
import type { ClientLimits } from './http/client-limits.js';
import type { OverloadMonitor } from './http/overload.js';
import type { Database } from './infra/db.js';
import type { EmailOutbox } from './infra/email-outbox.js';
import type { Logger } from './infra/logger.js';
import type { Mailer } from './infra/mailer.js';
import type { Store } from './infra/store.js';
import type { Lifecycle } from './ops/lifecycle.js';
import type { HeraldMetrics } from './ops/prometheus.js';
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
  realtime: Realtime;
  auth: Auth;
  sessions: SessionResolver;
  /**
   * Revocation convergence (auth/revocation.ts): `revocation.isSessionLive(userId, sessionId)` for live
   * connections, durable repair of auth store writes lost to an outage.
   */
  revocation: Revocation;
  lifecycle: Lifecycle;
  /** Outgoing webhooks: `webhooks.events.enqueue(tx, …)` queues events; the worker sends them (webhooks/). */
  webhooks: Webhooks;
  /** This app's Prometheus registry and the histograms the hot paths observe into (ops/prometheus.ts). */
  metrics: HeraldMetrics;
  /** Overload protection (http/overload.ts): health reports it, the guard refuses requests while it holds. */
  overload: OverloadMonitor;
  /** Per-client limits (http/client-limits.ts), ahead of the overload guard. */
  clientLimits: ClientLimits;
}

declare module 'fastify' {
  interface FastifyInstance {
    ctx: AppContext;
  }
}
