// Owns the Web Push feature's error codes (docs/api.md#web-push); a refused endpoint or key is a
// VALIDATION_ERROR (400) with details naming the field.
export const PushErrorCode = {
  /** Push is off (no VAPID keys in production): GET /notification/push/public-key answers 404. */
  NOT_CONFIGURED: 'PUSH_NOT_CONFIGURED',
} as const;
export type PushErrorCode = (typeof PushErrorCode)[keyof typeof PushErrorCode];
