// Small display helpers shared by the pages.
import { type Locale, type Texts, texts } from './i18n';

/**
 * A message for any thrown value or better-auth `{ error }` result. The service's own message is shown as it
 * came (CONTRACT §0's `message`), with the `details` of a validation error, so an admin sees which field failed.
 */
export function errorMessage(error: unknown, fallback?: string, t: Texts = texts('en')): string {
  if (error && typeof error === 'object') {
    const e = error as { message?: unknown; statusText?: unknown; code?: unknown; details?: unknown };
    // better-auth's answer to a request from an origin the service does not trust.
    if (e.code === 'INVALID_ORIGIN' || e.message === 'Invalid origin') return t.common.originRefused;
    if (typeof e.message === 'string' && e.message !== '') {
      const details = Array.isArray(e.details)
        ? (e.details as Array<{ path?: unknown; message?: unknown }>)
            .filter((d) => typeof d.message === 'string')
            .map((d) =>
              typeof d.path === 'string' && d.path ? `${d.path}: ${d.message}` : String(d.message),
            )
        : [];
      return details.length > 0 ? `${e.message} (${details.join('; ')})` : e.message;
    }
    if (typeof e.statusText === 'string' && e.statusText !== '') return e.statusText;
    if (typeof e.code === 'string') return e.code;
  }
  if (typeof error === 'string' && error !== '') return error;
  return fallback ?? t.common.somethingWrong;
}

export function errorCode(error: unknown): string | undefined {
  if (error && typeof error === 'object' && 'code' in error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

// Formatters per language (undefined: the browser's), made once each: constructing one is not cheap.
const formats = new Map<
  string,
  { time: Intl.DateTimeFormat; dateTime: Intl.DateTimeFormat; full: Intl.DateTimeFormat }
>();
function formatsOf(locale: Locale | undefined) {
  const key = locale ?? '';
  let f = formats.get(key);
  if (!f) {
    f = {
      time: new Intl.DateTimeFormat(locale, { hour: '2-digit', minute: '2-digit' }),
      dateTime: new Intl.DateTimeFormat(locale, {
        month: 'short',
        day: 'numeric',
        hour: '2-digit',
        minute: '2-digit',
      }),
      full: new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'short' }),
    };
    formats.set(key, f);
  }
  return f;
}

/** A time today, or a date and time, in the app's language (the browser's when none is given). */
export function formatTime(iso: string | number | Date, locale?: Locale): string {
  const date = new Date(iso);
  const today = new Date().toDateString() === date.toDateString();
  const f = formatsOf(locale);
  return today ? f.time.format(date) : f.dateTime.format(date);
}

/** Date (with the year) and time always: for expiries, which are rarely today. */
export function formatDateTime(iso: string | number | Date, locale?: Locale): string {
  return formatsOf(locale).full.format(new Date(iso));
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
