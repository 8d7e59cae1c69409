// Owns the webhooks feature's error codes (docs/api.md#webhooks); a refused URL is a VALIDATION_ERROR (400).
export const WebhookErrorCode = {
  /** No such webhook endpoint. */
  NOT_FOUND: 'NOT_FOUND',
} as const;
export type WebhookErrorCode = (typeof WebhookErrorCode)[keyof typeof WebhookErrorCode];
