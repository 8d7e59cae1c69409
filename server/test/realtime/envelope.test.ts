// Envelope validation, duplicate suppression and a fuzz of hostile input: nothing malformed gets through, nothing
// throws.
import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createDedup } from '../../src/realtime/dedup.js';
import { parseEnvelope } from '../../src/realtime/envelope.js';

const MAX = 4096;
const valid = () => ({
  v: 1,
  id: randomUUID(),
  topic: 'chat.message',
  instanceId: 'api-1',
  sentAt: Date.now(),
  payload: { a: 1 },
});

describe('parseEnvelope', () => {
  it('accepts a well-formed envelope and returns exactly its fields', () => {
    const e = valid();
    const result = parseEnvelope(JSON.stringify(e), MAX);
    expect(result).toEqual({ ok: true, envelope: e });
  });

  it.each([
    ['invalid JSON', '{', 'invalid_json'],
    ['an array', '[1]', 'not_an_object'],
    ['null', 'null', 'not_an_object'],
    ['a number', '42', 'not_an_object'],
    ['another version', JSON.stringify({ ...valid(), v: 2 }), 'bad_version'],
    ['a string version', JSON.stringify({ ...valid(), v: '1' }), 'bad_version'],
    ['a short id', JSON.stringify({ ...valid(), id: 'x' }), 'bad_id'],
    ['an id with spaces', JSON.stringify({ ...valid(), id: 'a b c d e f g h' }), 'bad_id'],
    ['a numeric id', JSON.stringify({ ...valid(), id: 12345678 }), 'bad_id'],
    ['an empty topic', JSON.stringify({ ...valid(), topic: '' }), 'bad_topic'],
    ['a topic with a newline', JSON.stringify({ ...valid(), topic: 'a\nb' }), 'bad_topic'],
    ['a huge topic', JSON.stringify({ ...valid(), topic: 'a'.repeat(500) }), 'bad_topic'],
    ['an instance id with a slash', JSON.stringify({ ...valid(), instanceId: '../x' }), 'bad_instance_id'],
    ['an instance id with CRLF', JSON.stringify({ ...valid(), instanceId: 'a\r\nb' }), 'bad_instance_id'],
    [
      'an instance id with dashes around',
      JSON.stringify({ ...valid(), instanceId: '-a-' }),
      'bad_instance_id',
    ],
    [
      'an overlong instance id',
      JSON.stringify({ ...valid(), instanceId: 'a'.repeat(65) }),
      'bad_instance_id',
    ],
    ['an object instance id', JSON.stringify({ ...valid(), instanceId: { a: 1 } }), 'bad_instance_id'],
    ['a string sentAt', JSON.stringify({ ...valid(), sentAt: 'now' }), 'bad_sent_at'],
    ['a fractional sentAt', JSON.stringify({ ...valid(), sentAt: 1.5 }), 'bad_sent_at'],
    ['a negative sentAt', JSON.stringify({ ...valid(), sentAt: -1 }), 'bad_sent_at'],
    ['no payload', JSON.stringify({ ...valid(), payload: undefined }), 'missing_payload'],
    ['an unknown field', JSON.stringify({ ...valid(), extra: true }), 'unknown_field'],
    ['a __proto__ field', '{"__proto__":{"polluted":1},"v":1}', 'unknown_field'],
    ['an oversized payload', JSON.stringify({ ...valid(), payload: 'x'.repeat(MAX + 1024) }), 'too_large'],
    ['multi-byte text over the limit', JSON.stringify({ ...valid(), payload: 'é'.repeat(MAX) }), 'too_large'],
  ])('rejects %s', (_name, raw, reason) => {
    expect(parseEnvelope(raw, MAX)).toEqual({ ok: false, reason });
  });

  it('survives a fuzz of random and mutated messages without throwing or accepting garbage', () => {
    const fields = ['v', 'id', 'topic', 'instanceId', 'sentAt', 'payload'] as const;
    const junk = [
      null,
      true,
      0,
      -1,
      1e308,
      '',
      'x'.repeat(200),
      [],
      {},
      { nested: { deep: [1, 2] } },
      '\u0000',
    ];
    let accepted = 0;
    for (let i = 0; i < 3000; i++) {
      const e: Record<string, unknown> = valid();
      const field = fields[i % fields.length] as string;
      const value = junk[Math.floor(i / fields.length) % junk.length];
      if (i % 7 === 0) delete e[field];
      else e[field] = value;
      let raw = JSON.stringify(e);
      if (i % 11 === 0) raw = randomBytes(64).toString('latin1');
      if (i % 13 === 0) raw = raw.slice(0, Math.floor(raw.length / 2));
      const result = parseEnvelope(raw, MAX);
      if (result.ok) {
        accepted++;
        // Only a payload mutation can stay valid; every header field is always checked.
        expect(field).toBe('payload');
        expect(result.envelope.payload).not.toBeUndefined();
      }
    }
    expect(accepted).toBeGreaterThan(0);
    // Deep nesting must not escape as an exception either.
    expect(parseEnvelope(`${'['.repeat(100_000)}${']'.repeat(100_000)}`, 1_000_000).ok).toBe(false);
  });
});

describe('dedup', () => {
  it('drops an id seen within the window and accepts it again after', () => {
    const dedup = createDedup(1000);
    expect(dedup.seen('a', 0)).toBe(false);
    expect(dedup.seen('a', 500)).toBe(true);
    expect(dedup.seen('b', 500)).toBe(false);
    expect(dedup.seen('a', 1001)).toBe(false);
  });

  it('keeps memory bounded under a flood of distinct ids', () => {
    const dedup = createDedup(60_000, 1000);
    for (let i = 0; i < 10_000; i++) dedup.seen(`id-${i}`, 1);
    expect(dedup.size()).toBeLessThanOrEqual(1001);
    // The newest ids are still remembered.
    expect(dedup.seen('id-9999', 2)).toBe(true);
  });

  it('forgets expired ids as time passes', () => {
    const dedup = createDedup(100);
    for (let i = 0; i < 100; i++) dedup.seen(`id-${i}`, i);
    dedup.seen('late', 10_000);
    expect(dedup.size()).toBe(1);
  });

  it('is disabled with a zero window', () => {
    const dedup = createDedup(0);
    expect(dedup.seen('a')).toBe(false);
    expect(dedup.seen('a')).toBe(false);
  });
});
