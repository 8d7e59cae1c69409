// Owns the one-click unsubscribe token (CONTRACT §12): signed with a key derived from AUTH_SECRET for this purpose
// only, naming one user and one notification type (or every email), with an expiry. It grants nothing else.
import { createHmac, createSecretKey, hkdfSync, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { NotificationTypeSchema } from '../notifications/schemas.js';

const PURPOSE = 'email-unsubscribe';
/** Links in old emails keep working this long (mailbox providers may call them weeks later). */
export const UNSUBSCRIBE_TOKEN_TTL_MS = 180 * 24 * 60 * 60 * 1000;

const PayloadSchema = z.strictObject({
  p: z.literal(PURPOSE),
  u: z.string().min(1).max(255),
  /** A notification type, or "*" for every email (emailEnabled: false). */
  t: z.union([NotificationTypeSchema, z.literal('*')]),
  /** Expiry, epoch seconds. */
  e: z.number().int().positive(),
});

export type UnsubscribeScope = { userId: string } & ({ scope: 'type'; type: string } | { scope: 'all' });

export type VerifyResult =
  | { ok: true; target: UnsubscribeScope }
  | { ok: false; reason: 'malformed' | 'signature' | 'expired' };

export function createUnsubscribeTokens(authSecret: string, now: () => number = Date.now) {
  // A key of its own: a token of another purpose (or a session cookie) signed with AUTH_SECRET never verifies here.
  // Imported once as a KeyObject: createHmac with raw key bytes imports them on every call, which made signing
  // 25–30 µs a token against 4–7 (a broadcast signs one per email recipient).
  const key = createSecretKey(Buffer.from(hkdfSync('sha256', authSecret, 'herald', `${PURPOSE}/v1`, 32)));
  const mac = (body: string) => createHmac('sha256', key).update(body).digest();

  return {
    sign(target: UnsubscribeScope, ttlMs = UNSUBSCRIBE_TOKEN_TTL_MS): string {
      const payload = {
        p: PURPOSE,
        u: target.userId,
        t: target.scope === 'all' ? '*' : target.type,
        e: Math.floor((now() + ttlMs) / 1000),
      };
      const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
      return `${body}.${mac(body).toString('base64url')}`;
    },
    verify(token: string): VerifyResult {
      if (token.length > 1024) return { ok: false, reason: 'malformed' };
      const [body, signature, extra] = token.split('.');
      if (!body || !signature || extra !== undefined) return { ok: false, reason: 'malformed' };
      const given = Buffer.from(signature, 'base64url');
      const expected = mac(body);
      // Constant time; lengths are public (always 32 bytes for a genuine token).
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        return { ok: false, reason: 'signature' };
      }
      let parsed: z.infer<typeof PayloadSchema>;
      try {
        parsed = PayloadSchema.parse(JSON.parse(Buffer.from(body, 'base64url').toString('utf8')));
      } catch {
        return { ok: false, reason: 'malformed' };
      }
      if (parsed.e * 1000 <= now()) return { ok: false, reason: 'expired' };
      return {
        ok: true,
        target:
          parsed.t === '*'
            ? { userId: parsed.u, scope: 'all' }
            : { userId: parsed.u, scope: 'type', type: parsed.t },
      };
    },
  };
}

export type UnsubscribeTokens = ReturnType<typeof createUnsubscribeTokens>;

/** The one-click link a notification or digest email carries (List-Unsubscribe and the footer). */
export function unsubscribeUrl(apiBaseUrl: string, token: string): string {
  return `${apiBaseUrl}/notification/unsubscribe?token=${token}`;
}
