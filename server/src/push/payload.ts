// Owns what a push message says: the plaintext JSON the service worker receives (docs/api.md#web-push) and the
// RFC 8030 headers derived from the notification (Urgency, Topic).

/** RFC 8291 §4: push services must accept 4,096 bytes of *encrypted* body; aes128gcm adds a 86-byte header
 * (salt 16, record size 4, key id length 1, key 65), the 1-byte padding delimiter and the 16-byte tag. */
export const MAX_PLAINTEXT_BYTES = 4096 - 86 - 1 - 16;

export interface PushPayload {
  id: string;
  type: string;
  title: string;
  content: string;
  url: string;
  createdAt: string;
}

export interface PushSource {
  id: string;
  type: string;
  title: string;
  content: string;
  metadata: Record<string, unknown> | null;
  createdAt: string;
}

/** The first action's URL made absolute against the web app, else the web app's notifications page. */
export function payloadUrl(metadata: Record<string, unknown> | null, feBaseUrl: string): string {
  const actions = metadata?.actions;
  const first = Array.isArray(actions) ? (actions[0] as { url?: unknown } | undefined) : undefined;
  if (first && typeof first.url === 'string') {
    try {
      return new URL(first.url, `${feBaseUrl}/`).href;
    } catch {
      // Stored URLs were checked on the way in; an unparsable one falls back to the list.
    }
  }
  return `${feBaseUrl}/notifications`;
}

/** Cuts a string to at most `bytes` UTF-8 bytes without splitting a character (surrogate pairs included). */
export function cutUtf8(text: string, bytes: number): string {
  if (Buffer.byteLength(text) <= bytes) return text;
  let used = 0;
  let end = 0;
  for (const ch of text) {
    const size = Buffer.byteLength(ch);
    if (used + size > bytes) break;
    used += size;
    end += ch.length;
  }
  return text.slice(0, end);
}

/** The message's plaintext: JSON of PushPayload, content cut (with an ellipsis) so the whole fits. */
export function buildPayload(n: PushSource, feBaseUrl: string): Buffer {
  const payload: PushPayload = {
    id: n.id,
    type: n.type,
    title: n.title,
    content: n.content,
    url: payloadUrl(n.metadata, feBaseUrl),
    createdAt: n.createdAt,
  };
  const full = Buffer.from(JSON.stringify(payload));
  if (full.length <= MAX_PLAINTEXT_BYTES) return full;
  // JSON escaping can make the content longer than its UTF-8 size: cut by the measured excess, re-measure.
  let content = n.content;
  for (let i = 0; i < 8; i++) {
    const size = Buffer.byteLength(JSON.stringify({ ...payload, content: `${content}…` }));
    if (size <= MAX_PLAINTEXT_BYTES) break;
    content = cutUtf8(content, Math.max(0, Buffer.byteLength(content) - (size - MAX_PLAINTEXT_BYTES)));
  }
  const cut = Buffer.from(JSON.stringify({ ...payload, content: `${content}…` }));
  if (cut.length <= MAX_PLAINTEXT_BYTES) return cut;
  // Escape-heavy content (control characters): drop it rather than send something the service refuses.
  return Buffer.from(JSON.stringify({ ...payload, content: '…' }));
}

/** RFC 8030 §5.3 Urgency from metadata.priority: low→low, normal→normal, high/urgent→high. */
export function urgencyOf(metadata: Record<string, unknown> | null): 'low' | 'normal' | 'high' {
  const priority = metadata?.priority;
  if (priority === 'low') return 'low';
  if (priority === 'high' || priority === 'urgent') return 'high';
  return 'normal';
}

/**
 * RFC 8030 §5.4 Topic (≤ 32 base64url characters): the notification id's 32 hex digits. A message still waiting
 * at the push service is replaced by a retry of the same notification, never by another notification.
 */
export function topicOf(notificationId: string): string {
  return notificationId.replaceAll('-', '').toLowerCase().slice(0, 32);
}
