// Owns the email.sent / email.failed events: what the durable email queue (infra/email-outbox.ts) reports when an
// email reaches its final outcome, as a domain event any consumer (webhooks) can take.
import type { EmailOutcome } from '../infra/email-outbox.js';
import type { DomainEvent } from './outbox.js';

/** The payload: the queue row's public facts (never the body). */
export type EmailEvent = Omit<EmailOutcome, 'status'>;

declare module './outbox.js' {
  interface DomainEventMap {
    'email.sent': EmailEvent;
    'email.failed': EmailEvent;
  }
}

export function emailOutcomeEvent(outcome: EmailOutcome): DomainEvent {
  return {
    type: outcome.status === 'sent' ? 'email.sent' : 'email.failed',
    data: {
      id: outcome.id,
      to: outcome.to,
      subject: outcome.subject,
      kind: outcome.kind,
      attempts: outcome.attempts,
      error: outcome.error,
    },
  };
}
