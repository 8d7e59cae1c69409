// The web app's dictionary (issue 26 item 3): English and German have the same keys, no empty text, German is
// really German (the few texts that are the same in both are named here), unknown locales fall back to English,
// and the contract's fixed accessible names (CONTRACT §10) are not in the dictionary at all.
import { describe, expect, it } from 'vitest';
import { FIXED, LOCALES, localeOf, type Texts, texts } from '../src/i18n';

type Leaf = { path: string; value: string };

// Functions are called with sample arguments, so their texts are compared like the others.
const SAMPLE = ['ARG1', 'ARG2', 'ARG3'];

function leaves(node: unknown, path = ''): Leaf[] {
  if (typeof node === 'string') return [{ path, value: node }];
  if (typeof node === 'function') {
    return [{ path, value: String((node as (...a: unknown[]) => unknown)(...SAMPLE.slice(0, node.length))) }];
  }
  if (node && typeof node === 'object') {
    return Object.entries(node).flatMap(([k, v]) => leaves(v, path ? `${path}.${k}` : k));
  }
  throw new Error(`${path}: unexpected ${typeof node}`);
}

const en = leaves(texts('en'));
const de = leaves(texts('de'));

// Words that are the same in German (or names that are not translated): reviewed, not forgotten.
const SAME_IN_BOTH = new Set([
  'common.optional',
  'titles.chat',
  'chatRoom.title',
  'inbox.types.system',
  'inbox.types.info',
  'titles.webhooks',
  'nav.chat',
  'nav.webhooks',
  'types.system',
  'types.info',
  'localeNames.en',
  'localeNames.de',
  'prefs.browser',
  'broadcast.strategyNames.sse',
  'broadcast.strategyNames.push',
  'users.colName',
  'users.colStatus',
  'metrics.bus',
  'apiKeys.colName',
  'webhooks.title',
  'webhooks.url',
  'webhooks.colStatus',
]);

describe('web app dictionary', () => {
  it('ships en and de', () => {
    expect(LOCALES).toEqual(['en', 'de']);
  });

  it('has every key in both languages, in the same shape', () => {
    expect(de.map((l) => l.path)).toEqual(en.map((l) => l.path));
    expect(en.length).toBeGreaterThan(200);
  });

  it('has no empty text', () => {
    for (const l of [...en, ...de]) expect(l.value.trim(), l.path).not.toBe('');
  });

  it('passes every argument into the text (no placeholder lost in translation)', () => {
    for (const locale of LOCALES) {
      const walk = (node: unknown, path: string): void => {
        if (typeof node === 'function') {
          const args = SAMPLE.slice(0, node.length);
          const text = String((node as (...a: unknown[]) => unknown)(...args));
          for (const a of args) expect(text, `${locale} ${path}`).toContain(a);
        } else if (node && typeof node === 'object') {
          for (const [k, v] of Object.entries(node)) walk(v, `${path}.${k}`);
        }
      };
      walk(texts(locale), locale);
    }
  });

  it('translates every text but the reviewed few', () => {
    const english = new Map(en.map((l) => [l.path, l.value]));
    const same = de.filter((l) => english.get(l.path) === l.value).map((l) => l.path);
    expect(same.sort()).toEqual([...SAME_IN_BOTH].sort());
  });

  it('keeps the contract’s accessible names out of the dictionary, the same in every language', () => {
    expect(FIXED).toEqual({
      email: 'Email',
      password: 'Password',
      name: 'Name',
      username: 'Username',
      title: 'Title',
      content: 'Content',
      type: 'Type',
      signUp: 'Sign up',
      signIn: 'Sign in',
      signOut: 'Sign out',
      sendNotification: 'Send notification',
      enablePush: 'Enable push notifications',
    });
    // A German text equal to a fixed name would mean it was "translated" into the English name by mistake, or
    // that a fixed name slipped into the dictionary where a page might translate it.
    const fixed = new Set<string>(Object.values(FIXED));
    for (const l of de) {
      if (fixed.has(l.value)) expect(SAME_IN_BOTH.has(l.path), `${l.path} = "${l.value}"`).toBe(true);
    }
  });

  it('gives the drop-in components their texts: the SDK’s English, a complete German, no contract name', async () => {
    const sdk = await import('@herald/client/react');
    const en = texts('en');
    expect(en.inbox).toBe(sdk.defaultInboxTexts);
    expect(en.chatRoom).toBe(sdk.defaultChatRoomTexts);
    expect(en.roomList).toBe(sdk.defaultRoomListTexts);
    expect(en.bell).toBe(sdk.defaultBellTexts);
    const de = texts('de');
    for (const part of ['inbox', 'chatRoom', 'roomList', 'bell'] as const)
      expect(Object.keys(de[part]).sort(), part).toEqual(Object.keys(en[part]).sort());
    expect(de.inbox.types).toEqual(de.types);
    // CONTRACT §10's names are no texts of the components: nothing here can rename the bell, `Message` or `Send`.
    const values = leaves({ inbox: de.inbox, chatRoom: de.chatRoom, roomList: de.roomList, bell: de.bell });
    for (const name of ['Message', 'Send']) expect(values.map((l) => l.value)).not.toContain(name);
    expect(de.bell.tooltip(2)).toBe('Benachrichtigungen, 2 ungelesen');
  });

  it('keeps the English origin message equal to the SDK’s (one wording in the docs)', async () => {
    const { originRefusedMessage } = await import('@herald/client');
    const check = { value: 'http://x.test', trusted: false, setting: 'CORS_ALLOWLISTED_ORIGINS' } as const;
    expect(texts('en').common.originBanner(check.value, check.setting)).toBe(originRefusedMessage(check));
    expect(texts('de').common.originBanner(check.value, check.setting)).toContain('CORS_ALLOWLISTED_ORIGINS');
  });
});

describe('locale choice', () => {
  it('maps BCP 47 tags to a shipped language and everything else to English', () => {
    const cases: Array<[string | null | undefined, keyof typeof expected]> = [
      ['de', 'de'],
      ['de-AT', 'de'],
      ['DE_ch', 'de'],
      ['en-GB', 'en'],
      ['fr', 'en'],
      ['', 'en'],
      [null, 'en'],
      [undefined, 'en'],
    ];
    const expected = { en: 'en', de: 'de' } as const;
    for (const [tag, locale] of cases) expect(localeOf(tag), String(tag)).toBe(expected[locale]);
  });

  it('gives the dictionary of the language', () => {
    const de: Texts = texts('de');
    expect(de.titles.notifications).toBe('Benachrichtigungen');
    expect(texts('en').titles.notifications).toBe('Notifications');
  });
});
