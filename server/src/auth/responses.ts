// Owns the few better-auth responses that break the contract's error body (docs/api.md#errors): its rate limiter's 429
// carries only a message, and its router answers unknown or disabled routes with an empty 404. Everything else
// better-auth answers passes through untouched.

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' };

async function bodyOf(response: Response): Promise<Record<string, unknown> | null> {
  try {
    const parsed: unknown = await response.clone().json();
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

export async function withContractErrors(response: Response, pathname: string): Promise<Response> {
  if (response.status === 429) {
    const body = await bodyOf(response);
    if (typeof body?.code === 'string') return response;
    const headers = new Headers(response.headers);
    headers.set('content-type', JSON_HEADERS['content-type']);
    const message = typeof body?.message === 'string' ? body.message : 'Too many requests';
    return new Response(JSON.stringify({ code: 'RATE_LIMITED', message }), { status: 429, headers });
  }
  if (response.status === 404) {
    const body = await bodyOf(response);
    if (typeof body?.code === 'string' && typeof body.message === 'string') return response;
    const headers = new Headers(response.headers);
    headers.set('content-type', JSON_HEADERS['content-type']);
    headers.delete('content-length');
    return new Response(JSON.stringify({ code: 'NOT_FOUND', message: `Route ${pathname} not found` }), {
      status: 404,
      headers,
    });
  }
  return response;
}
