// Accounts: better-auth's own client, pointed at the server's `/auth` base path, with the plugins the server runs
// (admin, magic link, username). Its request and response shapes are better-auth's (CONTRACT §1).
import { createAuthClient } from 'better-auth/client';
import {
  adminClient,
  inferAdditionalFields,
  magicLinkClient,
  usernameClient,
} from 'better-auth/client/plugins';
import type { FetchLike } from './http.js';

export function createHeraldAuth(authBaseURL: string, fetchImpl: FetchLike) {
  return createAuthClient({
    // A URL with a path is used as is (no `/api/auth` appended): the server mounts better-auth at `/auth`.
    baseURL: authBaseURL,
    fetchOptions: { customFetchImpl: fetchImpl, credentials: 'include' },
    plugins: [
      adminClient(),
      magicLinkClient(),
      usernameClient(),
      // The user's `locale` (BCP 47; the language of their emails): accepted by sign-up and update-user.
      inferAdditionalFields({ user: { locale: { type: 'string', required: false } } }),
    ],
  });
}

export type AuthClient = ReturnType<typeof createHeraldAuth>;
/** `{ session, user }` as GET /auth/get-session returns it. */
export type Session = AuthClient['$Infer']['Session'];
