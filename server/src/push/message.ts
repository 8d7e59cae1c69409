// Owns turning one queued push into an HTTP request: RFC 8291 aes128gcm encryption and the RFC 8292 VAPID
// Authorization header come from the `web-push` library (generateRequestDetails, getVapidHeaders); the request
// itself is sent by the pinned-address sender (webhooks/sender.ts) so the SSRF check holds at connect time.
import webPush from 'web-push';
import type { VapidConfig } from '../config.js';

/** Lifetime of a VAPID token (RFC 8292 §2: `exp` at most 24 h ahead). */
export const VAPID_TOKEN_SECONDS = 12 * 3600;
/** A token is reused for this long, then re-signed (well inside its lifetime, so it never goes out stale). */
const VAPID_REUSE_MS = 60 * 60 * 1000;
/** Audiences kept signed at once (endpoints are user input: the map must stay bounded). */
const MAX_AUDIENCES = 1_000;

export interface PushRequest {
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Builds push requests. The VAPID token is signed once per push service origin (its `aud`) and reused for an
 * hour: signing per message would cost an ECDSA signature per browser in a broadcast.
 */
export function createMessageBuilder(vapid: VapidConfig, now: () => number = Date.now) {
  const tokens = new Map<string, { authorization: string; renewAt: number }>();

  const authorization = (audience: string): string => {
    const t = now();
    const cached = tokens.get(audience);
    if (cached && cached.renewAt > t) return cached.authorization;
    if (tokens.size >= MAX_AUDIENCES) tokens.clear();
    const exp = Math.floor(t / 1000) + VAPID_TOKEN_SECONDS;
    const { Authorization } = webPush.getVapidHeaders(
      audience,
      vapid.subject,
      vapid.publicKey,
      vapid.privateKey,
      'aes128gcm',
      exp,
    );
    tokens.set(audience, { authorization: Authorization, renewAt: t + VAPID_REUSE_MS });
    return Authorization;
  };

  return {
    build(
      subscription: { endpoint: string; p256dh: string; auth: string },
      plaintext: Buffer,
      options: { ttlSeconds: number; urgency: 'low' | 'normal' | 'high'; topic: string },
    ): PushRequest {
      const audience = new URL(subscription.endpoint).origin;
      const details = webPush.generateRequestDetails(
        { endpoint: subscription.endpoint, keys: { p256dh: subscription.p256dh, auth: subscription.auth } },
        plaintext,
        {
          TTL: options.ttlSeconds,
          urgency: options.urgency,
          topic: options.topic,
          contentEncoding: 'aes128gcm',
          headers: { Authorization: authorization(audience) },
        },
      );
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(details.headers)) {
        // The sender sets these itself from the body it sends.
        const lower = name.toLowerCase();
        if (lower === 'content-length' || lower === 'content-type') continue;
        headers[lower] = String(value);
      }
      return { headers, body: details.body };
    },
  };
}

export type MessageBuilder = ReturnType<typeof createMessageBuilder>;
