// Display helpers shared by the components (and the web app): messages for thrown values, times, plurals.

/** A message for any thrown value or better-auth `{ error }` result. */
export function errorMessage(error: unknown, fallback = 'Something went wrong'): string {
  if (error && typeof error === 'object') {
    const e = error as { message?: unknown; statusText?: unknown; code?: unknown };
    if (typeof e.message === 'string' && e.message !== '') return e.message;
    if (typeof e.statusText === 'string' && e.statusText !== '') return e.statusText;
    if (typeof e.code === 'string') return e.code;
  }
  if (typeof error === 'string' && error !== '') return error;
  return fallback;
}

let formats: { time: Intl.DateTimeFormat; dateTime: Intl.DateTimeFormat } | undefined;

/** Hours and minutes today, with the date otherwise, in the reader's locale. */
export function formatTime(iso: string | number | Date): string {
  // Created on first use: a module that builds Intl objects when imported is not free of side effects.
  formats ??= {
    time: new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' }),
    dateTime: new Intl.DateTimeFormat(undefined, {
      month: 'short',
      day: 'numeric',
      hour: '2-digit',
      minute: '2-digit',
    }),
  };
  const date = new Date(iso);
  const today = new Date().toDateString() === date.toDateString();
  return today ? formats.time.format(date) : formats.dateTime.format(date);
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** 'friend_request' → 'Friend request'. */
export const typeLabel = (type: string) => type.replace('_', ' ').replace(/^./, (c) => c.toUpperCase());

/** Joins class names, skipping empty ones. */
export const cx = (...names: Array<string | false | null | undefined>) => names.filter(Boolean).join(' ');
