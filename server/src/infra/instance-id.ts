// Owns the instance-id alphabet: ids end up in Redis keys, logs, metrics and every bus envelope.
import { randomUUID } from 'node:crypto';

/** Keeps an instance id to a safe alphabet and length (config sanitises INSTANCE_ID; envelopes are checked). */
export function sanitizeInstanceId(raw: string): string {
  const cleaned = raw.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 64);
  return cleaned.replace(/^-+|-+$/g, '') || `api-${randomUUID()}`;
}
