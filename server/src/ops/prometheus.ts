// Owns the Prometheus side of GET /metrics (docs/api.md#operations): one prom-client Registry per app (tests build several
// apps in one process, so never the global registry), the latency histograms the hot paths feed with cheap
// observe() calls, process/runtime metrics, and the report figures mirrored at scrape time.
// Conventions: `herald_` prefix, base units (seconds, bytes), counters end in `_total`, and no `instance`/`job`
// label (Prometheus sets those to the scrape target): the instance's own id is the `instance_id` label.
import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { MetricsReport } from './metrics.js';

// Latencies of in-process work (fan-out writes, bus hops on one network): sub-millisecond to seconds.
const FAST_BUCKETS = [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
// HTTP requests include database round trips and password hashing.
const HTTP_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface HeraldMetrics {
  registry: Registry;
  httpDuration: Histogram<'route' | 'method' | 'status_class'>;
  busLatency: Histogram;
  sseFanout: Histogram;
  chatFanout: Histogram;
  /** Chat fan-out frames handed to sockets, and the socket writes (flushes) that carried them. */
  chatFanoutFrames: Counter;
  chatSocketWrites: Counter;
  chatSendStage: Histogram<'stage'>;
  /** Times `work` into `histogram` (seconds). */
  time<T>(histogram: Histogram, work: () => T): T;
  /** Sets the mirrored figures from a report, then renders the whole registry. */
  render(report: MetricsReport, live: { sseStreams: number }): Promise<string>;
}

export function createHeraldMetrics(instanceId: string): HeraldMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ instance_id: instanceId });
  // Event-loop lag, heap, GC, CPU, handles, file descriptors: prom-client's standard set, under our prefix.
  collectDefaultMetrics({ register: registry, prefix: 'herald_' });
  // …except three gauges it names `_total`, a suffix Prometheus reserves for counters; its
  // `herald_nodejs_active_resources{type}` gauge carries the same figures.
  for (const kind of ['handles', 'requests', 'resources'])
    registry.removeSingleMetric(`herald_nodejs_active_${kind}_total`);
  const registers = [registry];

  const httpDuration = new Histogram({
    name: 'herald_http_request_duration_seconds',
    help: 'HTTP request duration by route template, method and status class.',
    labelNames: ['route', 'method', 'status_class'] as const,
    buckets: HTTP_BUCKETS,
    registers,
  });
  const busLatency = new Histogram({
    name: 'herald_pubsub_latency_seconds',
    help: 'Bus delivery latency: receive time minus the sender’s sentAt (clock skew between hosts included).',
    buckets: FAST_BUCKETS,
    registers,
  });
  const sseFanout = new Histogram({
    name: 'herald_sse_fanout_duration_seconds',
    help: 'Time to write one bus message’s notification events to every local SSE stream it concerns.',
    buckets: FAST_BUCKETS,
    registers,
  });
  const chatFanout = new Histogram({
    name: 'herald_chat_fanout_duration_seconds',
    help:
      'Time to write one flush of chat fan-out frames to the local chat sockets (one message’s frames, or several ' +
      'messages’ under coalescing).',
    buckets: FAST_BUCKETS,
    registers,
  });
  const chatFanoutFrames = new Counter({
    name: 'herald_chat_fanout_frames_total',
    help: 'Chat fan-out frames handed to local sockets (one frame to one socket counts one).',
    registers,
  });
  const chatSocketWrites = new Counter({
    name: 'herald_chat_socket_writes_total',
    help:
      'Writes (flushes of a corked socket) that carried chat frames to local sockets; below the frame count when ' +
      'frames of several messages share a write (CHAT_COALESCE_MS).',
    registers,
  });

  const chatSendStage = new Histogram({
    name: 'herald_chat_send_stage_seconds',
    help:
      'Stages of a chat send on the receiving instance: queued (frame parsed → its turn on the socket), checks ' +
      '(session liveness and throttle), store (the PostgreSQL insert). The bus hop and the fan-out have their own histograms.',
    labelNames: ['stage'] as const,
    buckets: FAST_BUCKETS,
    registers,
  });

  const gauge = (name: string, help: string, labelNames: string[] = []) =>
    new Gauge({ name, help, labelNames, registers });
  // Cumulative figures kept elsewhere (bus counters, outbox): mirrored by resetting to the current total.
  const counter = (name: string, help: string) => new Counter({ name, help, registers });
  const mirror = (c: Counter, value: number) => {
    c.reset();
    c.inc(value);
  };

  const g = {
    distributed: gauge('herald_distributed_mode', '1 when the instance runs with the shared store.'),
    uptime: gauge('herald_uptime_seconds', 'Seconds since the instance started.'),
    degraded: gauge('herald_pubsub_degraded', '1 while the store is unreachable (local-only delivery).'),
    latencyMax: gauge('herald_pubsub_latency_max_seconds', 'Largest bus delivery latency seen since start.'),
    sseStreams: gauge('herald_sse_open_streams', 'Notification SSE streams open on this instance.'),
    chatSockets: gauge('herald_chat_open_sockets', 'Chat WebSockets open on this instance.'),
    activeInstances: gauge('herald_cluster_active_instances', 'Live instances in the cluster registry.'),
    memberSockets: gauge('herald_cluster_instance_chat_sockets', 'Chat sockets per live instance.', [
      'member',
    ]),
    memberHeartbeat: gauge(
      'herald_cluster_instance_last_heartbeat_timestamp_seconds',
      'Last heartbeat per live instance (Unix time).',
      ['member'],
    ),
    emailPending: gauge(
      'herald_email_queue_pending',
      'Emails queued and not yet sent (queue depth), cluster-wide.',
    ),
    emailFailed: gauge(
      'herald_email_queue_failed',
      'Emails given up after EMAIL_MAX_ATTEMPTS (last 7 days).',
    ),
    emailSent: gauge('herald_email_queue_sent', 'Emails sent (last 7 days), cluster-wide.'),
    webhookDepth: gauge(
      'herald_webhook_queue_depth',
      'Webhook deliveries queued and not yet delivered (queue depth), cluster-wide.',
    ),
    webhookFailed: gauge(
      'herald_webhook_queue_failed',
      'Webhook deliveries given up after WEBHOOK_RETRY_WINDOW_MS (last 7 days), cluster-wide.',
    ),
    pushDepth: gauge(
      'herald_push_queue_depth',
      'Web Push messages queued and not yet sent (queue depth), cluster-wide.',
    ),
    webhookDelivered: gauge(
      'herald_webhook_queue_delivered',
      'Webhook deliveries answered with a 2xx (last 7 days), cluster-wide.',
    ),
    dbPool: gauge(
      'herald_db_pool_connections',
      'PostgreSQL pool connections of this instance by pool (primary, replica:<host:port>) and state (total, idle, waiting = queries queued for one).',
      ['pool', 'state'],
    ),
    replicaUp: gauge('herald_db_replica_up', '1 while the read replica answers its position polls.', [
      'replica',
    ]),
    replicaEligible: gauge(
      'herald_db_replica_serving',
      '1 while the read replica serves reads (up and within DATABASE_READ_MAX_LAG_MS).',
      ['replica'],
    ),
    replicaLag: gauge(
      'herald_db_replica_lag_seconds',
      'How far the read replica is behind the primary (NaN while unknown).',
      ['replica'],
    ),
  };
  const dbReads = new Counter({
    name: 'herald_db_reads_total',
    help: 'Replica-eligible reads by where they ran (target: primary or replica) and what they served (feature: notifications = lists and counts, chat = history and room lists).',
    labelNames: ['target', 'feature'] as const,
    registers,
  });
  const dbReadProbes = new Counter({
    name: 'herald_db_replica_probes_total',
    help: 'Reads whose position no replica was known to have yet (positions are polled), so one replica was asked for its replay position: by where the read then ran.',
    labelNames: ['target'] as const,
    registers,
  });
  const dbReadFallbacks = new Counter({
    name: 'herald_db_replica_fallbacks_total',
    help: 'Reads that failed on a replica and were answered by the primary.',
    registers,
  });
  const c = {
    published: counter('herald_pubsub_messages_published_total', 'Bus messages published.'),
    received: counter('herald_pubsub_messages_received_total', 'Bus messages received from other instances.'),
    publishFailures: counter(
      'herald_pubsub_publish_failures_total',
      'Bus publishes that did not reach the store.',
    ),
    malformed: counter('herald_pubsub_malformed_dropped_total', 'Invalid bus messages dropped.'),
    duplicates: counter('herald_pubsub_duplicates_dropped_total', 'Duplicate bus messages dropped.'),
    degradedTransitions: counter(
      'herald_pubsub_degraded_transitions_total',
      'Times the bus entered degraded mode.',
    ),
    emailAttemptFailures: counter(
      'herald_email_send_failures_total',
      'Failed email send attempts on this instance since start.',
    ),
    pushSends: counter(
      'herald_push_sends_total',
      'Web Push messages accepted by a push service (2xx) on this instance since start.',
    ),
    pushAttemptFailures: counter(
      'herald_push_failures_total',
      'Failed Web Push attempts on this instance since start (each retry counts).',
    ),
    pushGivenUp: counter(
      'herald_push_given_up_total',
      'Web Push messages given up on this instance since start (4xx, expired, subscription gone).',
    ),
    pushSubscriptionsRemoved: counter(
      'herald_push_subscriptions_removed_total',
      'Push subscriptions removed after a 404/410 from their push service on this instance since start.',
    ),
    webhookAttemptFailures: counter(
      'herald_webhook_delivery_failures_total',
      'Failed webhook delivery attempts on this instance since start (each retry counts).',
    ),
  };

  return {
    registry,
    httpDuration,
    busLatency,
    sseFanout,
    chatFanout,
    chatFanoutFrames,
    chatSocketWrites,
    chatSendStage,
    time(histogram, work) {
      const start = process.hrtime.bigint();
      try {
        return work();
      } finally {
        histogram.observe(Number(process.hrtime.bigint() - start) / 1e9);
      }
    },
    async render(report, live) {
      g.distributed.set(Number(report.distributedMode));
      g.uptime.set(report.pubsub.uptime);
      g.degraded.set(Number(report.pubsub.isDegraded));
      g.latencyMax.set(report.pubsub.maxLatencyMs / 1000);
      g.sseStreams.set(live.sseStreams);
      g.chatSockets.set(report.chat.connectedClients);
      g.activeInstances.set(report.cluster.activeInstances);
      g.memberSockets.reset();
      g.memberHeartbeat.reset();
      for (const r of report.cluster.instances) {
        g.memberSockets.set({ member: r.instanceId }, r.connectedClients);
        g.memberHeartbeat.set({ member: r.instanceId }, r.lastHeartbeat / 1000);
      }
      mirror(c.published, report.pubsub.messagesPublished);
      mirror(c.received, report.pubsub.messagesReceived);
      mirror(c.publishFailures, report.pubsub.publishFailures);
      mirror(c.malformed, report.bus.malformedDropped);
      mirror(c.duplicates, report.bus.duplicatesDropped);
      mirror(c.degradedTransitions, report.bus.degradedTransitions);
      // Without the database the queue figures are unknown: NaN, not a reassuring 0 that would hide a backlog.
      g.emailPending.set(report.email?.pending ?? Number.NaN);
      g.emailFailed.set(report.email?.failed ?? Number.NaN);
      g.emailSent.set(report.email?.sent ?? Number.NaN);
      if (report.email) mirror(c.emailAttemptFailures, report.email.attemptFailures);
      g.webhookDepth.set(report.webhooks?.pending ?? Number.NaN);
      g.webhookFailed.set(report.webhooks?.failed ?? Number.NaN);
      g.webhookDelivered.set(report.webhooks?.delivered ?? Number.NaN);
      if (report.webhooks) mirror(c.webhookAttemptFailures, report.webhooks.attemptFailures);
      g.dbPool.reset();
      g.replicaUp.reset();
      g.replicaEligible.reset();
      g.replicaLag.reset();
      dbReads.reset();
      dbReadProbes.reset();
      if (report.database) {
        for (const p of report.database.pools) {
          g.dbPool.set({ pool: p.pool, state: 'total' }, p.total);
          g.dbPool.set({ pool: p.pool, state: 'idle' }, p.idle);
          g.dbPool.set({ pool: p.pool, state: 'waiting' }, p.waiting);
        }
        for (const [feature, n] of Object.entries(report.database.reads.byFeature)) {
          dbReads.inc({ target: 'primary', feature }, n.primary);
          dbReads.inc({ target: 'replica', feature }, n.replica);
        }
        mirror(dbReadFallbacks, report.database.reads.fallbacks);
        dbReadProbes.inc({ target: 'primary' }, report.database.reads.probes.primary);
        dbReadProbes.inc({ target: 'replica' }, report.database.reads.probes.replica);
        for (const r of report.database.replicas) {
          g.replicaUp.set({ replica: r.name }, Number(r.up));
          g.replicaEligible.set({ replica: r.name }, Number(r.eligible));
          g.replicaLag.set({ replica: r.name }, r.lagMs === null ? Number.NaN : r.lagMs / 1000);
        }
      }
      g.pushDepth.set(report.push?.pending ?? Number.NaN);
      if (report.push) {
        mirror(c.pushSends, report.push.sent);
        mirror(c.pushAttemptFailures, report.push.attemptFailures);
        mirror(c.pushGivenUp, report.push.givenUp);
        mirror(c.pushSubscriptionsRemoved, report.push.subscriptionsRemoved);
      }
      return registry.metrics();
    },
  };
}

/** Records every HTTP request by its route template (never the raw URL: ids would explode the label set). */
export function installHttpMetrics(app: FastifyInstance, metrics: HeraldMetrics): void {
  app.addHook('onResponse', (request, reply, done) => {
    metrics.httpDuration.observe(
      {
        route: request.routeOptions.url ?? 'unmatched',
        method: request.method,
        status_class: `${Math.floor(reply.statusCode / 100)}xx`,
      },
      reply.elapsedTime / 1000,
    );
    done();
  });
}
