// Owns the texts of every email in every shipped locale, and which shipped locale a user's tag resolves to.
// Strings may name {{appName}} (filled once at start-up) and {count}-style run-time values (filled by the renderer).
import { normalizeLocale } from '../config.js';

export const SHIPPED_LOCALES = ['en', 'de'] as const;
export type ShippedLocale = (typeof SHIPPED_LOCALES)[number];

const NOTIFICATION_TYPE_LABELS_EN = {
  system: 'System',
  message: 'Messages',
  friend_request: 'Friend requests',
  mention: 'Mentions',
  announcement: 'Announcements',
  warning: 'Warnings',
  success: 'Success messages',
  info: 'Information',
};

const en = {
  layout: {
    footer: 'You receive this email because you have an account at {{appName}}.',
    linkHint: 'If the button does not work, copy this link into your browser:',
  },
  'verify-email': {
    subject: 'Verify your email for {{appName}}',
    heading: 'Confirm your email address',
    intro: 'Hello, confirm your email address to finish creating your {{appName}} account.',
    action: 'Verify email',
    ignore: 'If you did not sign up, ignore this email.',
  },
  'reset-password': {
    subject: 'Reset your {{appName}} password',
    heading: 'Reset your password',
    intro:
      'Hello, someone asked to reset the password of your {{appName}} account. If it was not you, ignore this email.',
    action: 'Choose a new password',
    ignore: 'Your password stays the same until you choose a new one.',
  },
  'magic-link': {
    subject: 'Your {{appName}} sign-in link',
    heading: 'Sign in to {{appName}}',
    intro: 'Use this link to sign in. It expires in 15 minutes and works once.',
    action: 'Sign in',
    ignore: 'If you did not ask for it, ignore this email.',
  },
  notification: {
    // The subject is the notification's own title; the sender name carries the brand.
    subject: '{title}',
    action: 'View your notifications',
    unsubscribe: 'Unsubscribe from “{type}” emails',
    preferences: 'Email preferences',
  },
  digest: {
    subjectOne: 'Your {{appName}} digest: 1 unread notification',
    subjectMany: 'Your {{appName}} digest: {count} unread notifications',
    heading: 'What you missed',
    intro: 'Unread notifications from {start} to {end}:',
    more: 'and {count} more',
    action: 'View all notifications',
    unsubscribe: 'Unsubscribe from all {{appName}} emails',
    preferences: 'Email preferences',
  },
  types: NOTIFICATION_TYPE_LABELS_EN,
};

export type Dictionary = typeof en;

const de: Dictionary = {
  layout: {
    footer: 'Du erhältst diese E-Mail, weil du ein Konto bei {{appName}} hast.',
    linkHint: 'Falls der Button nicht funktioniert, kopiere diesen Link in deinen Browser:',
  },
  'verify-email': {
    subject: 'Bestätige deine E-Mail-Adresse für {{appName}}',
    heading: 'Bestätige deine E-Mail-Adresse',
    intro: 'Hallo, bestätige deine E-Mail-Adresse, um dein {{appName}}-Konto fertig einzurichten.',
    action: 'E-Mail-Adresse bestätigen',
    ignore: 'Wenn du dich nicht registriert hast, ignoriere diese E-Mail.',
  },
  'reset-password': {
    subject: 'Setze dein {{appName}}-Passwort zurück',
    heading: 'Passwort zurücksetzen',
    intro:
      'Hallo, jemand hat das Zurücksetzen des Passworts deines {{appName}}-Kontos angefordert. Warst du es nicht, ignoriere diese E-Mail.',
    action: 'Neues Passwort wählen',
    ignore: 'Dein Passwort bleibt unverändert, bis du ein neues wählst.',
  },
  'magic-link': {
    subject: 'Dein Anmeldelink für {{appName}}',
    heading: 'Bei {{appName}} anmelden',
    intro: 'Melde dich mit diesem Link an. Er ist 15 Minuten gültig und funktioniert einmal.',
    action: 'Anmelden',
    ignore: 'Wenn du ihn nicht angefordert hast, ignoriere diese E-Mail.',
  },
  notification: {
    subject: '{title}',
    action: 'Benachrichtigungen ansehen',
    unsubscribe: 'E-Mails zu „{type}“ abbestellen',
    preferences: 'E-Mail-Einstellungen',
  },
  digest: {
    subjectOne: 'Deine {{appName}}-Zusammenfassung: 1 ungelesene Benachrichtigung',
    subjectMany: 'Deine {{appName}}-Zusammenfassung: {count} ungelesene Benachrichtigungen',
    heading: 'Was du verpasst hast',
    intro: 'Ungelesene Benachrichtigungen von {start} bis {end}:',
    more: 'und {count} weitere',
    action: 'Alle Benachrichtigungen ansehen',
    unsubscribe: 'Alle E-Mails von {{appName}} abbestellen',
    preferences: 'E-Mail-Einstellungen',
  },
  types: {
    system: 'System',
    message: 'Nachrichten',
    friend_request: 'Freundschaftsanfragen',
    mention: 'Erwähnungen',
    announcement: 'Ankündigungen',
    warning: 'Warnungen',
    success: 'Erfolgsmeldungen',
    info: 'Informationen',
  },
};

export const DICTIONARIES: Record<ShippedLocale, Dictionary> = { en, de };

/**
 * The shipped locale a user's tag resolves to: the exact tag, then its language (`de-AT` → `de`), then `en`.
 * A missing or invalid tag means the deployment's default locale (itself resolved the same way).
 */
export function resolveLocale(tag: string | null | undefined, defaultLocale: string): ShippedLocale {
  const pick = (t: string | null): ShippedLocale | null => {
    if (!t) return null;
    const lower = t.toLowerCase();
    const exact = SHIPPED_LOCALES.find((l) => l === lower);
    if (exact) return exact;
    return SHIPPED_LOCALES.find((l) => l === lower.split('-')[0]) ?? null;
  };
  // A tag the user chose but no shipped locale matches falls back to en (CONTRACT §12); no tag at all means the
  // deployment's default.
  if (tag) return pick(normalizeLocale(tag)) ?? 'en';
  return pick(normalizeLocale(defaultLocale)) ?? 'en';
}

/** `{name}` placeholders of a string filled with run-time values (single braces, so templates never see them). */
export function fill(text: string, values: Record<string, string | number>): string {
  return text.replace(/\{(\w+)\}/g, (m, key: string) => (key in values ? String(values[key]) : m));
}
