// What the push feature needs from outside it, as plain types: the composition root (app.ts) wires in the
// pinned-address HTTP sender and the SSRF address check (both owned by webhooks/, a sibling feature this one
// must not import) and the webhook event queue (push.sent / push.failed).
import type { EventOutbox } from '../events/outbox.js';

export interface PushSendRequest {
  url: string;
  headers: Record<string, string>;
  body: Buffer;
  contentType: string;
  userAgent: string;
}

export interface PushSendResult {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  /** The answer's Retry-After header. */
  retryAfter?: string;
  /** True when the SSRF rules refused the target's address (no request was made). */
  refused?: boolean;
}

/** One request to the address checked at send time (resolve, refuse private ranges, connect to exactly it). */
export interface PushSender {
  (request: PushSendRequest): Promise<PushSendResult>;
  close(): void;
}

/** Checks the host's resolved addresses; resolves to the refusal reason, or null when allowed. */
export type AddressCheck = (url: URL) => Promise<string | null>;

export type PushEventType = 'push.sent' | 'push.failed';

/** The push.sent / push.failed payload: one message's final outcome (never the keys or the body). */
export interface PushOutcomeEvent {
  id: string;
  notificationId: string;
  userId: string;
  subscriptionId: string;
  pushService: string;
  status: string;
  statusCode: number | null;
  attempts: number;
  error: string | null;
}

declare module '../events/outbox.js' {
  interface DomainEventMap {
    'push.sent': PushOutcomeEvent;
    'push.failed': PushOutcomeEvent;
  }
}

/** The domain-event port, as far as push uses it (webhooks consume push.sent / push.failed). */
export type PushEvents = Pick<EventOutbox, 'wants' | 'write'>;
