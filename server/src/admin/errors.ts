// Owns the admin feature's error codes (per-identifier broadcast failures, docs/api.md).
export const AdminErrorCode = {
  /** A broadcast identifier matched no user (or only a banned one). */
  NOT_FOUND: 'NOT_FOUND',
} as const;
export type AdminErrorCode = (typeof AdminErrorCode)[keyof typeof AdminErrorCode];
