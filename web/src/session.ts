// The signed-in user as the pages need it, from the SDK's session hook.
import { useSession } from '@herald/client/react';
import { useCallback, useRef } from 'react';

export interface CurrentUser {
  id: string;
  name: string;
  email: string;
  role: string | null;
  isAdmin: boolean;
  /** BCP 47 tag of the user's emails, null for the service's default. */
  locale: string | null;
}

export function useCurrentUser(): { user: CurrentUser | null; isPending: boolean; refetch: () => void } {
  const session = useSession();
  // A stable function, so effects can depend on it without running on every render.
  const latest = useRef(session.refetch);
  latest.current = session.refetch;
  const refetch = useCallback(() => {
    void latest.current();
  }, []);
  const u = session.data?.user as
    | { id: string; name: string; email: string; role?: string | null; locale?: string | null }
    | undefined;
  const user = u
    ? {
        id: u.id,
        name: u.name,
        email: u.email,
        role: u.role ?? null,
        isAdmin: u.role === 'admin',
        locale: u.locale ?? null,
      }
    : null;
  return { user, isPending: session.isPending, refetch };
}

// Set by the Sign out button: the redirect that follows goes to /sign-in without `?next=` (a page someone left on
// purpose is not one to come back to after the next sign-in). Any other loss of the session keeps `?next=`.
let signedOutOnPurpose = false;
export function markSignedOut(): void {
  signedOutOnPurpose = true;
}
/** True once after markSignedOut(). */
export function takeSignedOut(): boolean {
  const was = signedOutOnPurpose;
  signedOutOnPurpose = false;
  return was;
}
