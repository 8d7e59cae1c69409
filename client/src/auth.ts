// Accounts: better-auth's own client, pointed at the server's `/auth` base path, with the plugins the server runs
// (admin, magic link, username). Its request and response shapes are better-auth's (CONTRACT §1).
import { type AuthClient as BetterAuthClient, createAuthClient } from 'better-auth/client';
import {
  type AdminClientOptions,
  adminClient,
  inferAdditionalFields,
  magicLinkClient,
  type UsernameClientOptions,
  usernameClient,
} from 'better-auth/client/plugins';
import type { FetchLike } from './http.js';

// The plugins' types instantiated with their default options, as the calls below infer them (a bare
// `ReturnType<typeof adminClient>` loses the user fields the plugins add, such as `role` and `username`).
type HeraldAuthPlugins = [
  ReturnType<typeof adminClient<AdminClientOptions>>,
  ReturnType<typeof magicLinkClient>,
  ReturnType<typeof usernameClient<UsernameClientOptions>>,
  ReturnType<typeof localeField>,
];

// The user's `locale` (BCP 47; the language of their emails): accepted by sign-up and update-user.
const localeField = () => inferAdditionalFields({ user: { locale: { type: 'string', required: false } } });

/**
 * better-auth's client with the admin, magic-link and username plugins. Named through better-auth's own types (not
 * expanded by the compiler), so the package's declarations refer to better-auth instead of restating its internals.
 */
export type AuthClient = BetterAuthClient<{ plugins: HeraldAuthPlugins }>;

export function createHeraldAuth(authBaseURL: string, fetchImpl: FetchLike): AuthClient {
  return createAuthClient({
    // A URL with a path is used as is (no `/api/auth` appended): the server mounts better-auth at `/auth`.
    baseURL: authBaseURL,
    fetchOptions: { customFetchImpl: fetchImpl, credentials: 'include' },
    plugins: [adminClient(), magicLinkClient(), usernameClient(), localeField()] satisfies HeraldAuthPlugins,
  });
}

/** `{ session, user }` as GET /auth/get-session returns it. */
export type Session = AuthClient['$Infer']['Session'];
