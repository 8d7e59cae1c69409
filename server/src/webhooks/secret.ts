// Owns webhook signing secrets: generation (`whsec_` + base64 of 32 random bytes), their encryption at rest
// with a key derived from AUTH_SECRET, and the Standard Webhooks signature over "<id>.<timestamp>.<body>".
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';

export const SECRET_PREFIX = 'whsec_';

export function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** The HMAC key: the base64-decoded part after `whsec_` (the Standard Webhooks convention). */
export function secretBytes(secret: string): Buffer {
  return Buffer.from(
    secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret,
    'base64',
  );
}

/** `v1,<base64 HMAC-SHA256(secret bytes, "<id>.<timestamp>.<body>")>`. */
export function sign(secret: string, id: string, timestamp: number, body: string): string {
  const mac = createHmac('sha256', secretBytes(secret)).update(`${id}.${timestamp}.${body}`).digest('base64');
  return `v1,${mac}`;
}

export interface SecretBox {
  seal(secret: string): string;
  open(sealed: string): string;
}

/**
 * AES-256-GCM with a key derived (HKDF-SHA256) from AUTH_SECRET. Stored as `v1.<iv>.<tag>.<ciphertext>`
 * (base64url). Changing AUTH_SECRET makes existing secrets unreadable: their deliveries fail with an error
 * saying so, and the endpoints must be created again.
 */
export function createSecretBox(authSecret: string): SecretBox {
  const key = Buffer.from(hkdfSync('sha256', authSecret, 'herald', 'webhook-secret-v1', 32));
  return {
    seal(secret) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const ct = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
      return ['v1', iv, cipher.getAuthTag(), ct]
        .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
        .join('.');
    },
    open(sealed) {
      const [version, iv, tag, ct] = sealed.split('.');
      if (version !== 'v1' || !iv || !tag || ct === undefined) throw new Error('unreadable webhook secret');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      try {
        return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString(
          'utf8',
        );
      } catch {
        throw new Error(
          'webhook secret cannot be decrypted (AUTH_SECRET changed?); create the webhook again',
        );
      }
    },
  };
}
