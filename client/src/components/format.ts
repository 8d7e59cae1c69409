// Display helpers shared by the components: messages for thrown values, times, English plurals (the defaults').

/** A message for any thrown value or better-auth `{ error }` result. */
export function errorMessage(error: unknown, fallback: string): string {
  if (error && typeof error === 'object') {
    const e = error as { message?: unknown; statusText?: unknown; code?: unknown };
    if (typeof e.message === 'string' && e.message !== '') return e.message;
    if (typeof e.statusText === 'string' && e.statusText !== '') return e.statusText;
    if (typeof e.code === 'string') return e.code;
  }
  if (typeof error === 'string' && error !== '') return error;
  return fallback;
}

// Per locale (undefined: the reader's), created on first use: a module that builds Intl objects when imported is
// not free of side effects, and constructing one is not cheap.
const formats = new Map<string, { time: Intl.DateTimeFormat; dateTime: Intl.DateTimeFormat }>();

/** Hours and minutes today, with the date otherwise, in `locale` (a BCP 47 tag; default: the reader's). */
export function formatTime(iso: string | number | Date, locale?: string): string {
  let f = formats.get(locale ?? '');
  if (!f) {
    f = {
      time: new Intl.DateTimeFormat(locale, { hour: '2-digit', minute: '2-digit' }),
      dateTime: new Intl.DateTimeFormat(locale, {
        month: 'short',
        day: 'numeric',
        hour: '2-digit',
        minute: '2-digit',
      }),
    };
    formats.set(locale ?? '', f);
  }
  const date = new Date(iso);
  const today = new Date().toDateString() === date.toDateString();
  return today ? f.time.format(date) : f.dateTime.format(date);
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** Joins class names, skipping empty ones. */
export const cx = (...names: Array<string | false | null | undefined>) => names.filter(Boolean).join(' ');
