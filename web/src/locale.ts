// The app's language: the signed-in user's `locale` (set at sign-up or in the preferences), else the browser's;
// anything but a shipped language is English (i18n.ts). Every page and component reads its texts here.
import { useEffect } from 'react';
import { browserLocale, type Locale, localeOf, type Texts, texts } from './i18n';
import { useCurrentUser } from './session';

export function useLocale(): Locale {
  const { user } = useCurrentUser();
  // A user without a stored locale gets the service's DEFAULT_LOCALE in emails, which the app cannot know: the
  // browser's language is the better guess for the screen.
  return user?.locale ? localeOf(user.locale) : browserLocale();
}

export function useTexts(): Texts {
  return texts(useLocale());
}

/** Keeps `<html lang>` equal to the language shown, so screen readers pronounce it right. */
export function useDocumentLanguage(locale: Locale): void {
  useEffect(() => {
    document.documentElement.lang = locale;
  }, [locale]);
}
