// Owns the Web Push request and response shapes (docs/api.md#web-push): a browser's PushSubscription JSON, checked
// field by field (RFC 8291 key sizes, a real P-256 point), and the subscription and delivery views.
import { ECDH } from 'node:crypto';
import { z } from 'zod';
import { noNul } from '../http/schemas.js';

const BASE64URL = /^[A-Za-z0-9_-]+={0,2}$/;

const decoded = (value: string) => Buffer.from(value, 'base64url');

/** The p256dh key: base64url of a 65-byte uncompressed point that lies on P-256 (RFC 8291 §3.2). */
const P256dhSchema = z
  .string()
  .min(1)
  .max(128)
  .regex(BASE64URL, 'must be base64url')
  .refine((v) => {
    const bytes = decoded(v);
    if (bytes.length !== 65 || bytes[0] !== 4) return false;
    try {
      ECDH.convertKey(bytes, 'prime256v1');
      return true;
    } catch {
      return false;
    }
  }, 'must be an uncompressed P-256 public key (65 bytes, base64url)')
  // Stored and sent unpadded, whatever form the browser used.
  .transform((v) => decoded(v).toString('base64url'));

/** The auth secret: 16 bytes (RFC 8291 §3.2). */
const AuthSecretSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(BASE64URL, 'must be base64url')
  .refine((v) => decoded(v).length === 16, 'must be a 16-byte auth secret (base64url)')
  .transform((v) => decoded(v).toString('base64url'));

export const MAX_ENDPOINT_LENGTH = 2048;

export const SubscribeBodySchema = z
  .strictObject({
    endpoint: z
      .string()
      .min(1)
      .max(MAX_ENDPOINT_LENGTH)
      .refine(noNul, 'must not contain NUL characters')
      .describe('the push service URL of this browser (https; checked like webhook URLs)'),
    keys: z.strictObject({ p256dh: P256dhSchema, auth: AuthSecretSchema }),
    expirationTime: z
      .number()
      .int()
      .min(0)
      .max(8_640_000_000_000_000)
      .nullable()
      .optional()
      .describe('epoch ms when the browser will expire it, or null'),
  })
  .meta({
    example: {
      endpoint: 'https://fcm.googleapis.com/fcm/send/dGVzdC1lbmRwb2ludA:APA91bExample',
      expirationTime: null,
      keys: {
        p256dh: 'BAtIzr3L4gXWolp6UlxijWXc1zKmAA90MQ_sxtFvBriJPTQ5l-3C2-G7x8jndYNu67mPw_AvUG7pDV5LdvvoYZA',
        auth: 'pD1klZMO_LreYNxIvSOnOw',
      },
    },
  });
export type SubscribeBody = z.infer<typeof SubscribeBodySchema>;

export const SubscriptionSchema = z
  .object({
    id: z.string(),
    endpoint: z.string(),
    createdAt: z.string(),
    updatedAt: z.string().describe('last time a browser (re)subscribed it'),
    expirationTime: z.string().nullable(),
    userAgent: z.string().nullable().describe('the subscribing browser’s User-Agent, to tell devices apart'),
  })
  .meta({
    example: {
      id: '0f5b3c1e-7a2d-4e8f-9b6a-3c2d1e0f9a8b',
      endpoint: 'https://fcm.googleapis.com/fcm/send/dGVzdC1lbmRwb2ludA:APA91bExample',
      createdAt: '2026-01-01T12:00:00.000Z',
      updatedAt: '2026-01-01T12:00:00.000Z',
      expirationTime: null,
      userAgent: 'Mozilla/5.0 (X11; Linux x86_64) Chrome/142.0',
    },
  });
export type SubscriptionView = z.infer<typeof SubscriptionSchema>;

export const PUSH_STATUSES = ['pending', 'sent', 'failed', 'gone', 'cancelled'] as const;

export const PushDeliverySchema = z.object({
  id: z.string(),
  notificationId: z.string(),
  userId: z.string(),
  subscriptionId: z.string(),
  pushService: z.string().describe('origin of the push service (the VAPID audience)'),
  status: z
    .enum(PUSH_STATUSES)
    .describe(
      'pending (queued or waiting for a retry), sent (2xx), failed (other 4xx, refused, or expired after retries), gone (404/410: the subscription was removed), cancelled (subscription removed or moved, notification deleted or read before sending)',
    ),
  statusCode: z.number().int().nullable().describe('HTTP status of the latest attempt (null: no answer)'),
  attempts: z.number().int(),
  nextRetryAt: z.string().nullable(),
  error: z.string().nullable(),
  createdAt: z.string(),
  lastAttemptAt: z.string().nullable(),
  sentAt: z.string().nullable(),
});
export type PushDeliveryView = z.infer<typeof PushDeliverySchema>;
