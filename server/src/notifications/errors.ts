// Owns the notification feature's error codes (HTTP error bodies and SSE `error` events, docs/api.md).
export const NotificationErrorCode = {
  NOT_FOUND: 'NOT_FOUND',
  ACTION_URL_NOT_ALLOWED: 'ACTION_URL_NOT_ALLOWED',
  UNAVAILABLE: 'UNAVAILABLE',
  TOO_MANY_STREAMS: 'TOO_MANY_STREAMS',
  RATE_LIMITED: 'RATE_LIMITED',
  RESYNC_REQUIRED: 'RESYNC_REQUIRED',
  SESSION_REVOKED: 'SESSION_REVOKED',
  SESSION_EXPIRED: 'SESSION_EXPIRED',
  SHUTTING_DOWN: 'SHUTTING_DOWN',
  INTERNAL_ERROR: 'INTERNAL_ERROR',
} as const;
export type NotificationErrorCode = (typeof NotificationErrorCode)[keyof typeof NotificationErrorCode];
