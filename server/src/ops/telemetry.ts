// Owns OpenTelemetry tracing: off by default, started from the OTEL_* settings that config.ts reads (Config.tracing).
// Nothing here imports an OpenTelemetry SDK statically: with tracing off this module costs one function call, and
// with it on the SDK is loaded here, before server.ts imports the app, because instrumentation must be in place
// before the modules it patches (pg, ioredis, node:http) are loaded. Works the same under tsx (`npm start`) and
// from the build (`start:prod`).
//
// What produces spans: every HTTP request (instrumentation-http: the server span, continuing an incoming W3C
// `traceparent`; @fastify/otel: the route, hooks and handler under it), PostgreSQL queries (instrumentation-pg) and
// store commands (instrumentation-ioredis) made inside a traced operation, and Herald's own operations that run
// outside a request (infra/tracing.ts: chat sends, the email outbox and webhook deliveries; push will use the same
// helper). Background polls that find nothing to do make no spans (requireParentSpan), so an idle instance exports
// nothing.
//
// The SDK is composed from its packages (sdk-trace, context-async-hooks, the OTLP/HTTP exporters and the four
// instrumentations) rather than @opentelemetry/sdk-node: sdk-node also brings the gRPC, metrics, logs, Zipkin and
// Prometheus exporters (~20 MB more), which would double the tracing share of a production install.
import { register } from 'node:module';
import type { TracingConfig } from '../config.js';
import type { Logger } from '../infra/logger.js';

export interface Telemetry {
  /** Exports what is buffered and stops; bounded by the caller's shutdown timeout. */
  shutdown(): Promise<void>;
}

/** Modules the ESM loader hook wraps so ESM `import`s of them are patched (the rest load untouched). */
const ESM_INSTRUMENTED = ['pg', 'pg-pool', 'ioredis'];

export async function startTelemetry(
  tracing: TracingConfig | null,
  logger: Pick<Logger, 'info' | 'warn' | 'error'>,
): Promise<Telemetry | null> {
  if (!tracing) return null;
  // ESM imports of CommonJS packages (`import pg from 'pg'`) do not go through require(), where the
  // instrumentations hook by default: import-in-the-middle's loader hook covers them, limited to what is traced.
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url, {
    data: { include: ESM_INSTRUMENTED },
  });
  const [
    api,
    { W3CTraceContextPropagator, W3CBaggagePropagator, CompositePropagator },
    { AsyncLocalStorageContextManager },
    { resourceFromAttributes },
    sdk,
    { registerInstrumentations },
    { HttpInstrumentation },
    { PgInstrumentation },
    { IORedisInstrumentation },
    { FastifyOtelInstrumentation },
  ] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/core'),
    import('@opentelemetry/context-async-hooks'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/instrumentation'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-pg'),
    import('@opentelemetry/instrumentation-ioredis'),
    import('@fastify/otel'),
  ]);

  const exporter =
    tracing.exporter === 'console'
      ? new sdk.ConsoleSpanExporter()
      : tracing.protocol === 'http/json'
        ? new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter({
            url: tracing.url,
            headers: tracing.headers,
          })
        : new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter({
            url: tracing.url,
            headers: tracing.headers,
          });

  const ratio = new sdk.TraceIdRatioBasedSampler(tracing.samplerRatio);
  const root = tracing.sampler.endsWith('always_off')
    ? new sdk.AlwaysOffSampler()
    : tracing.sampler.endsWith('traceidratio')
      ? ratio
      : new sdk.AlwaysOnSampler();
  const sampler = tracing.sampler.startsWith('parentbased_') ? new sdk.ParentBasedSampler({ root }) : root;

  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({
      ...tracing.resourceAttributes,
      'service.name': tracing.serviceName,
    }),
    sampler,
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter, scheduledDelayMillis: tracing.exportDelayMs })],
  });
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  api.propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
  api.trace.setGlobalTracerProvider(provider);

  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new HttpInstrumentation({
        // Outgoing requests (webhook deliveries, SMTP is not HTTP) are traced only inside a traced operation.
        requireParentforOutgoingSpans: true,
      }),
      new FastifyOtelInstrumentation({ registerOnInitialization: true }),
      new PgInstrumentation({ requireParentSpan: true }),
      new IORedisInstrumentation({ requireParentSpan: true }),
    ],
  });
  logger.info(
    {
      exporter: tracing.exporter,
      protocol: tracing.protocol,
      url: tracing.url,
      service: tracing.serviceName,
    },
    `tracing on: ${tracing.exporter === 'console' ? 'console' : `${tracing.protocol} to ${tracing.url}`}`,
  );
  return {
    async shutdown() {
      try {
        await provider.shutdown();
      } catch (err) {
        logger.warn({ err: (err as Error).message }, 'tracing: final export failed');
      }
    },
  };
}
