// Small display helpers shared by the pages.

/** A message for any thrown value or better-auth `{ error }` result. */
export function errorMessage(error: unknown, fallback = 'Something went wrong'): string {
  if (error && typeof error === 'object') {
    const e = error as { message?: unknown; statusText?: unknown; code?: unknown };
    // better-auth's answer to a request from an origin the service does not trust.
    if (e.code === 'INVALID_ORIGIN' || e.message === 'Invalid origin') {
      return "The service does not accept requests from this page's address: add it to CORS_ALLOWLISTED_ORIGINS, or open the app at the address the service's start log prints.";
    }
    if (typeof e.message === 'string' && e.message !== '') return e.message;
    if (typeof e.statusText === 'string' && e.statusText !== '') return e.statusText;
    if (typeof e.code === 'string') return e.code;
  }
  if (typeof error === 'string' && error !== '') return error;
  return fallback;
}

export function errorCode(error: unknown): string | undefined {
  if (error && typeof error === 'object' && 'code' in error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

const timeFormat = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });
const dateTimeFormat = new Intl.DateTimeFormat(undefined, {
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
});

export function formatTime(iso: string | number | Date): string {
  const date = new Date(iso);
  const today = new Date().toDateString() === date.toDateString();
  return today ? timeFormat.format(date) : dateTimeFormat.format(date);
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
