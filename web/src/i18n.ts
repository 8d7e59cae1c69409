// The web app's own small dictionary (en, de) for the texts of the pages that deal with language and email
// (sign-up's language choice, preferences' digest and language, the unsubscribe page). Field labels that the
// contract fixes as accessible names (Email, Password, Name, Username, Sign up) stay as they are.
export const LOCALES = ['en', 'de'] as const;
export type Locale = (typeof LOCALES)[number];

const en = {
  language: 'Language',
  languageHint: 'The language of your emails.',
  localeNames: { en: 'English', de: 'Deutsch' },
  digest: 'Email digest',
  digestHint: 'Gather notification emails into one email per hour or day instead of one each.',
  digestOptions: { off: 'Off: one email per notification', hourly: 'Hourly', daily: 'Daily' },
  unsubscribeTitle: 'Unsubscribe',
  unsubscribeType: (type: string) => `Stop emails about “${type}” notifications?`,
  unsubscribeAll: 'Stop all notification emails?',
  unsubscribeButton: 'Unsubscribe',
  unsubscribeDone: 'Done: you will not get these emails any more. You can change this in your preferences.',
  unsubscribeInvalid: 'This unsubscribe link is not valid. Change your email preferences after signing in.',
  unsubscribeExpired: 'This unsubscribe link has expired. Change your email preferences after signing in.',
  unsubscribeFailed: 'Could not unsubscribe; try again.',
  preferencesLink: 'Email preferences',
};

export type Texts = typeof en;

const de: Texts = {
  language: 'Sprache',
  languageHint: 'Die Sprache deiner E-Mails.',
  localeNames: { en: 'English', de: 'Deutsch' },
  digest: 'E-Mail-Zusammenfassung',
  digestHint: 'Benachrichtigungen stündlich oder täglich in einer E-Mail bündeln statt einzeln zu senden.',
  digestOptions: { off: 'Aus: eine E-Mail pro Benachrichtigung', hourly: 'Stündlich', daily: 'Täglich' },
  unsubscribeTitle: 'Abbestellen',
  unsubscribeType: (type: string) => `Keine E-Mails mehr zu „${type}“-Benachrichtigungen?`,
  unsubscribeAll: 'Keine Benachrichtigungs-E-Mails mehr?',
  unsubscribeButton: 'Abbestellen',
  unsubscribeDone:
    'Erledigt: Du erhältst diese E-Mails nicht mehr. Das kannst du in deinen Einstellungen ändern.',
  unsubscribeInvalid:
    'Dieser Abbestell-Link ist ungültig. Ändere deine E-Mail-Einstellungen nach der Anmeldung.',
  unsubscribeExpired:
    'Dieser Abbestell-Link ist abgelaufen. Ändere deine E-Mail-Einstellungen nach der Anmeldung.',
  unsubscribeFailed: 'Abbestellen fehlgeschlagen; bitte versuche es erneut.',
  preferencesLink: 'E-Mail-Einstellungen',
};

const DICTIONARIES: Record<Locale, Texts> = { en, de };

/** The shipped locale for a BCP 47 tag (`de-AT` → de); anything else is English, as in the emails. */
export function localeOf(tag: string | null | undefined): Locale {
  const language = (tag ?? '').toLowerCase().split(/[-_]/)[0];
  return LOCALES.find((l) => l === language) ?? 'en';
}

/** The browser's preferred shipped language (for visitors who are not signed in). */
export function browserLocale(): Locale {
  return localeOf(typeof navigator === 'undefined' ? undefined : navigator.language);
}

export function texts(locale: Locale): Texts {
  return DICTIONARIES[locale];
}
