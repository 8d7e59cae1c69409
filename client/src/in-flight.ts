// Sign-out waits for the requests already sent. A page often sends a request just as its user signs out (a refetch
// after a live event, a timer); when the server reads that request after the sign-out has removed the session, it
// answers 401 and the browser logs "Failed to load resource" although nothing went wrong. A request's fetch settles
// once its response headers arrive, and by then the server has checked its session, so the sign-out waits for
// those (never for a stream's body), but not longer than `maxWaitMs`. (Kept small: the SDK has a size budget.)
import type { FetchLike } from './http.js';

/** `fetchImpl`, except that a request to `signOutURL` waits (at most `maxWaitMs`) for the requests in flight. */
export function signOutAfterInFlight(fetchImpl: FetchLike, signOutURL: string, maxWaitMs = 2_000): FetchLike {
  const inFlight = new Set<Promise<Response>>();
  return async (input, init) => {
    if (String(input).split('?')[0] === signOutURL) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        Promise.allSettled(inFlight),
        new Promise((r) => (timer = setTimeout(r, maxWaitMs))),
      ]);
      clearTimeout(timer);
    }
    const sent = fetchImpl(input, init);
    const forget = () => inFlight.delete(sent);
    sent.then(forget, forget);
    inFlight.add(sent);
    return sent;
  };
}
