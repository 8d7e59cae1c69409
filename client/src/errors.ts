// The SDK's error type: every failed call of Herald's own routes throws one, carrying the contract's error body.

/**
 * A failed call of Herald's own routes, with the contract's `{ code, message, details? }`.
 * @example
 * try {
 *   await client.notifications.setRead(id, true);
 * } catch (e) {
 *   if (e instanceof HeraldApiError && e.status === 404) removeFromList(id);
 * }
 */
export class HeraldApiError extends Error {
  override readonly name = 'HeraldApiError';
  constructor(
    /** HTTP status; 0 when the request never got an answer (network failure, aborted). */
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Array<{ path: string; message: string }>,
  ) {
    super(message);
  }
}

/**
 * Builds the error for a non-2xx response, reading the `{ code, message, details? }` body when there is one.
 * @example
 * if (!res.ok) throw await errorFromResponse(res);
 */
export async function errorFromResponse(res: Response): Promise<HeraldApiError> {
  let body: unknown = null;
  try {
    body = await res.json();
  } catch {
    // Not JSON (a proxy's HTML page, an empty body): fall back to the status line below.
  }
  if (body && typeof body === 'object') {
    const b = body as { code?: unknown; message?: unknown; details?: unknown };
    if (typeof b.code === 'string') {
      return new HeraldApiError(
        res.status,
        b.code,
        typeof b.message === 'string' ? b.message : b.code,
        Array.isArray(b.details) ? (b.details as HeraldApiError['details']) : undefined,
      );
    }
  }
  return new HeraldApiError(res.status, `HTTP_${res.status}`, res.statusText || `HTTP ${res.status}`);
}
