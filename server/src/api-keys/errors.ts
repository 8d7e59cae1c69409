// Owns the api-keys feature's error codes (docs/api.md#api-keys).
export const ApiKeyErrorCode = {
  /** No such key to revoke (or not a key id at all). */
  NOT_FOUND: 'NOT_FOUND',
  /** The presented key is unknown, revoked, expired or malformed. */
  UNAUTHORIZED: 'UNAUTHORIZED',
  /** The key is valid but lacks the route's scope. */
  FORBIDDEN: 'FORBIDDEN',
  /** The key used up its requests for the current window. */
  RATE_LIMITED: 'RATE_LIMITED',
} as const;
export type ApiKeyErrorCode = (typeof ApiKeyErrorCode)[keyof typeof ApiKeyErrorCode];
