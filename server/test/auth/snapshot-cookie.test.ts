// The get-session fast path's snapshot cookie (auth/session-read.ts snapshotParts / snapshotValue) keeps the part
// before the issue time encoded and ready, and signs and encodes only the rest per answer. It must give exactly the
// value that encoding the whole cookie at once gives, wherever the 3-byte groups of base64 cut the UTF-8 text
// (names and emails with characters of 1 to 4 bytes), and better-auth's signature over it.
import { createHmac, createSecretKey } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { snapshotParts, snapshotValue } from '../../src/auth/session-read.js';

const SECRET = 'snapshot-test-secret-with-enough-length';
const KEY = createSecretKey(Buffer.from(SECRET, 'utf8'));

/** The reference: the whole cookie JSON built as one string, signed and encoded at once. */
function atOnce(sessionJson: string, userJson: string, now: number, maxAgeS: number): string {
  const expiresAt = now + maxAgeS * 1000;
  const data = `{"session":${sessionJson},"user":${userJson},"updatedAt":${now},"version":"1"`;
  const signature = createHmac('sha256', SECRET)
    .update(`${data},"expiresAt":${expiresAt}}`)
    .digest('base64url');
  return Buffer.from(`{"session":${data}},"expiresAt":${expiresAt},"signature":"${signature}"}`).toString(
    'base64url',
  );
}

describe('snapshot cookie', () => {
  it('equals the cookie encoded at once, wherever the base64 groups cut multi-byte characters', () => {
    const alphabet = ['a', 'é', '€', '🦊', '"', '\\', ' '];
    let seed = 7;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed;
    };
    let checked = 0;
    for (let n = 0; n < 60; n++) {
      // Names of every length mod 3 in bytes, with characters of 1, 2, 3 and 4 bytes at every position.
      const name = Array.from({ length: n }, () => alphabet[next() % alphabet.length]).join('');
      const sessionJson = JSON.stringify({ id: `s${n}`, token: 't'.repeat(n % 5), userId: 'u1' });
      const userJson = JSON.stringify({ id: 'u1', name, email: `${name}@example.com` });
      const parts = snapshotParts(sessionJson, userJson);
      for (const now of [1_700_000_000_000, 1_700_000_000_001 + n, 9_999_999_999_999]) {
        const value = snapshotValue(parts, KEY, now, 900);
        expect(value).toBe(atOnce(sessionJson, userJson, now, 900));
        const decoded = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
        expect(decoded.session.user.name).toBe(name);
        expect(decoded.session.updatedAt).toBe(now);
        expect(decoded.expiresAt).toBe(now + 900_000);
        checked++;
      }
      // The prepared parts are not consumed by an answer: the same parts serve the next one.
      expect(snapshotValue(parts, KEY, 5, 60)).toBe(atOnce(sessionJson, userJson, 5, 60));
    }
    expect(checked).toBe(180);
  });
});
