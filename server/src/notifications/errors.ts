// Owns the notification feature's own error codes (HTTP error bodies and SSE `error` events, docs/api.md). The
// generic ones (NOT_FOUND, RATE_LIMITED, UNAVAILABLE, INTERNAL_ERROR, …) are http/errors.ts's HttpErrorCode.
import { HttpErrorCode } from '../http/errors.js';

export const NotificationErrorCode = {
  ACTION_URL_NOT_ALLOWED: 'ACTION_URL_NOT_ALLOWED',
  TOO_MANY_STREAMS: 'TOO_MANY_STREAMS',
  RESYNC_REQUIRED: 'RESYNC_REQUIRED',
  SESSION_REVOKED: 'SESSION_REVOKED',
  SESSION_EXPIRED: 'SESSION_EXPIRED',
  SHUTTING_DOWN: 'SHUTTING_DOWN',
} as const;
export type NotificationErrorCode = (typeof NotificationErrorCode)[keyof typeof NotificationErrorCode];

/** The codes the SSE stream's `error` event carries: the feature's own and the generic ones it uses. */
export const StreamErrorCode = {
  ...NotificationErrorCode,
  NOT_FOUND: HttpErrorCode.NOT_FOUND,
  RATE_LIMITED: HttpErrorCode.RATE_LIMITED,
  UNAVAILABLE: HttpErrorCode.UNAVAILABLE,
  INTERNAL_ERROR: HttpErrorCode.INTERNAL_ERROR,
} as const;
export type StreamErrorCode = (typeof StreamErrorCode)[keyof typeof StreamErrorCode];
