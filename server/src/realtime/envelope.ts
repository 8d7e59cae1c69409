// Owns the wire format of bus messages: validation of everything received from the store (never trusted), the
// size bound, and the rate-limited log used for dropped messages.

import { sanitizeInstanceId } from '../infra/instance-id.js';
import type { Logger } from '../infra/logger.js';
import type { Envelope } from './bus.js';

export const ENVELOPE_VERSION = 1;
/** Topics are dotted names chosen by our own code; anything else arriving on the channel is hostile. */
export const TOPIC_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const MESSAGE_ID_PATTERN = /^[A-Za-z0-9_-]{8,64}$/;
const INSTANCE_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
/** Bytes the envelope fields add around the payload (ids, topic, numbers, keys); generous on purpose. */
export const ENVELOPE_OVERHEAD_BYTES = 512;
const ENVELOPE_KEYS = new Set(['v', 'id', 'topic', 'instanceId', 'sentAt', 'payload']);

export type ParseResult = { ok: true; envelope: Envelope<unknown> } | { ok: false; reason: string };

export function isValidTopic(topic: unknown): topic is string {
  return typeof topic === 'string' && TOPIC_PATTERN.test(topic);
}

/** Validates one raw message from the store. Size is checked before parsing so a huge message costs nothing. */
export function parseEnvelope(raw: string, maxPayloadBytes: number): ParseResult {
  // String length is a lower bound of the UTF-8 size; the exact count is only needed near the limit.
  const limit = maxPayloadBytes + ENVELOPE_OVERHEAD_BYTES;
  if (raw.length > limit || (raw.length * 3 > limit && Buffer.byteLength(raw) > limit)) {
    return { ok: false, reason: 'too_large' };
  }
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return { ok: false, reason: 'invalid_json' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, reason: 'not_an_object' };
  }
  const obj = value as Record<string, unknown>;
  for (const key of Object.keys(obj))
    if (!ENVELOPE_KEYS.has(key)) return { ok: false, reason: 'unknown_field' };
  if (obj.v !== ENVELOPE_VERSION) return { ok: false, reason: 'bad_version' };
  if (typeof obj.id !== 'string' || !MESSAGE_ID_PATTERN.test(obj.id)) return { ok: false, reason: 'bad_id' };
  if (!isValidTopic(obj.topic)) return { ok: false, reason: 'bad_topic' };
  if (
    typeof obj.instanceId !== 'string' ||
    !INSTANCE_ID_PATTERN.test(obj.instanceId) ||
    sanitizeInstanceId(obj.instanceId) !== obj.instanceId
  ) {
    return { ok: false, reason: 'bad_instance_id' };
  }
  if (typeof obj.sentAt !== 'number' || !Number.isSafeInteger(obj.sentAt) || obj.sentAt <= 0) {
    return { ok: false, reason: 'bad_sent_at' };
  }
  if (!('payload' in obj) || obj.payload === undefined) return { ok: false, reason: 'missing_payload' };
  return {
    ok: true,
    envelope: {
      v: 1,
      id: obj.id,
      topic: obj.topic,
      instanceId: obj.instanceId,
      sentAt: obj.sentAt,
      payload: obj.payload,
    },
  };
}

/**
 * Logs at most one line per interval; the rest are counted and reported with the next line. A flood of hostile
 * messages must not turn into a flood of log lines.
 */
export function createRateLimitedLog(logger: Logger, intervalMs = 10_000) {
  let lastAt = 0;
  let suppressed = 0;
  return (fields: Record<string, unknown>, message: string) => {
    const now = Date.now();
    if (now - lastAt < intervalMs) {
      suppressed++;
      return;
    }
    lastAt = now;
    logger.warn({ ...fields, suppressed }, message);
    suppressed = 0;
  };
}
