// Owns Herald's own spans for work that runs outside an HTTP request (queue workers, chat sends over WebSocket).
// Built on @opentelemetry/api only: with tracing off (ops/telemetry.ts starts no SDK) the API is a no-op and a
// span costs a function call. Database and store calls made inside `withSpan` become its children, so the span
// of one email, webhook or push delivery shows its queries and its outgoing request.
import { type Attributes, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';

const tracer = trace.getTracer('herald');

/** Runs `fn` inside a span named `name` (error status and the exception recorded when it throws). */
export function withSpan<T>(
  name: string,
  attributes: Attributes,
  fn: () => Promise<T>,
  kind: SpanKind = SpanKind.INTERNAL,
): Promise<T> {
  return tracer.startActiveSpan(name, { attributes, kind }, async (span) => {
    try {
      return await fn();
    } catch (err) {
      span.recordException(err instanceof Error ? err : String(err));
      span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : undefined });
      throw err;
    } finally {
      span.end();
    }
  });
}

export { SpanKind };
