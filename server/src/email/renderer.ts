// Owns how every email is rendered: named Handlebars templates (an HTML and a plain-text part, wrapped in a shared
// layout), the texts of the recipient's locale, the branding (APP_NAME, EMAIL_LOGO_URL, EMAIL_ACCENT_COLOR), and
// the operator's overrides from EMAIL_TEMPLATES_DIR, checked once at start-up (docs/email.md).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Handlebars from 'handlebars';
import { ConfigError } from '../config.js';
import { escapeHtml, safeSubject } from '../infra/mailer.js';
import {
  DICTIONARIES,
  type Dictionary,
  fill,
  resolveLocale,
  SHIPPED_LOCALES,
  type ShippedLocale,
} from './locales.js';

export const TEMPLATE_NAMES = [
  'layout',
  'verify-email',
  'reset-password',
  'magic-link',
  'notification',
  'digest',
] as const;
export type TemplateName = (typeof TEMPLATE_NAMES)[number];
type EmailName = Exclude<TemplateName, 'layout'>;
type Part = 'html' | 'txt' | 'subject.txt';

const BUNDLED_DIR = fileURLToPath(new URL('./templates/', import.meta.url));
const MAX_TEMPLATE_BYTES = 256 * 1024;
const OVERRIDE_NAME = new RegExp(
  `^(${TEMPLATE_NAMES.join('|')})(?:\\.(${SHIPPED_LOCALES.join('|')}))?\\.(html|txt|subject\\.txt)$`,
);

export interface DigestEntry {
  type: string;
  title: string;
  content: string;
  createdAt: Date;
}

/** What one email needs besides its recipient; each kind has its own variables (docs/email.md). */
export type EmailData =
  | { template: 'verify-email' | 'reset-password' | 'magic-link'; url: string }
  | { template: 'notification'; type: string; title: string; content: string; unsubscribeUrl: string }
  | {
      template: 'digest';
      /** Newest first, at most 50. */
      items: DigestEntry[];
      /** All unread notifications of the window (items plus those left out). */
      total: number;
      windowStart: Date;
      windowEnd: Date;
      unsubscribeUrl: string;
    };

export interface RenderedEmail {
  subject: string;
  html: string;
  text: string;
  /** Content-Language, and List-Unsubscribe(-Post) for notification and digest emails. */
  headers: Record<string, string>;
  locale: ShippedLocale;
}

export interface EmailBranding {
  appName: string;
  logoUrl?: string | undefined;
  accentColor: string;
  defaultLocale: string;
  feBaseUrl: string;
  templatesDir?: string | undefined;
}

type Compiled = (vars: object) => string;

/** Black or white, whichever reads better on the accent colour (WCAG relative luminance). */
export function textColorOn(hex: string): string {
  const h = hex.replace('#', '');
  const full = h.length === 3 ? [...h].map((c) => c + c).join('') : h;
  const [r, g, b] = [0, 2, 4].map((i) => {
    const c = Number.parseInt(full.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  }) as [number, number, number];
  const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  return luminance > 0.4 ? '#111111' : '#ffffff';
}

/** Marks the one value an HTML part inserts as markup: the layout's `content` (an already rendered part). */
class Markup {
  constructor(readonly html: string) {}
}

/** Every string of a template's variables HTML-escaped (objects and arrays deeply), Markup unwrapped as is. */
function escapeValues(value: unknown): unknown {
  if (typeof value === 'string') return escapeHtml(value);
  if (value instanceof Markup) return value.html;
  if (Array.isArray(value)) return value.map(escapeValues);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, escapeValues(v)]));
  }
  return value;
}

const cut = (text: string, max: number) =>
  text.length > max ? `${text.slice(0, max - 1).trimEnd()}…` : text;

export function createEmailRenderer(branding: EmailBranding) {
  // One isolated Handlebars environment: no helpers or partials registered anywhere else can leak in.
  const hbs = Handlebars.create();
  // strict: a variable that does not exist is an error, so a misspelt name in an override is refused at start-up
  // instead of rendering empty. knownHelpersOnly: only the built-in block helpers (if, each, unless, with).
  // noEscape everywhere: HTML parts get their values escaped before rendering (escapeValues), so even `{{{title}}}`
  // in an override cannot let user text through as markup, and URLs keep a readable `=`.
  const compile = (source: string): Compiled =>
    hbs.compile(source, { strict: true, knownHelpersOnly: true, noEscape: true });

  // Texts per locale with {{appName}} filled once (it never changes while the process runs).
  const strings = Object.fromEntries(
    SHIPPED_LOCALES.map((locale) => {
      const dict = DICTIONARIES[locale];
      const filled = JSON.parse(
        JSON.stringify(dict).replace(/\{\{appName\}\}/g, JSON.stringify(branding.appName).slice(1, -1)),
      ) as Dictionary;
      return [locale, filled];
    }),
  ) as Record<ShippedLocale, Dictionary>;

  // ---- sources: bundled files, then the operator's overrides (per locale or for all) ----
  const bundled = new Map<string, string>();
  for (const name of TEMPLATE_NAMES) {
    for (const part of ['html', 'txt'] as const) {
      bundled.set(`${name}.${part}`, readFileSync(path.join(BUNDLED_DIR, `${name}.${part}`), 'utf8'));
    }
  }
  const overrides = new Map<string, { file: string; source: string }>();
  if (branding.templatesDir) {
    const dir = path.resolve(branding.templatesDir);
    let files: string[];
    try {
      files = readdirSync(dir);
    } catch (err) {
      throw new ConfigError([`EMAIL_TEMPLATES_DIR: cannot read ${dir}: ${(err as Error).message}`]);
    }
    const problems: string[] = [];
    for (const file of files.sort()) {
      if (file.startsWith('.')) continue; // editor and OS files (.DS_Store, .swp)
      const full = path.join(dir, file);
      const match = OVERRIDE_NAME.exec(file);
      if (!match || (match[1] === 'layout' && match[3] === 'subject.txt') || !statSync(full).isFile()) {
        problems.push(
          `EMAIL_TEMPLATES_DIR: ${full}: unknown template file (expected <name>[.<locale>].html|.txt|.subject.txt with name one of ${TEMPLATE_NAMES.join(', ')} and locale one of ${SHIPPED_LOCALES.join(', ')}; see docs/email.md)`,
        );
        continue;
      }
      if (statSync(full).size > MAX_TEMPLATE_BYTES) {
        problems.push(`EMAIL_TEMPLATES_DIR: ${full}: larger than ${MAX_TEMPLATE_BYTES} bytes`);
        continue;
      }
      overrides.set(file, { file: full, source: readFileSync(full, 'utf8') });
    }
    if (problems.length > 0) throw new ConfigError(problems);
  }

  /** Compiled part of a template for a locale, or null for a subject nobody overrode (the dictionary's). */
  const table = new Map<string, { compiled: Compiled; file: string | null }>();
  const key = (name: TemplateName, locale: ShippedLocale, part: Part) => `${name}|${locale}|${part}`;
  for (const name of TEMPLATE_NAMES) {
    for (const locale of SHIPPED_LOCALES) {
      for (const part of ['html', 'txt', 'subject.txt'] as const) {
        const override = overrides.get(`${name}.${locale}.${part}`) ?? overrides.get(`${name}.${part}`);
        const source = override?.source ?? bundled.get(`${name}.${part}`);
        if (source === undefined) continue;
        table.set(key(name, locale, part), { compiled: compile(source), file: override?.file ?? null });
      }
    }
  }

  const accentTextColor = textColorOn(branding.accentColor);
  const common = (locale: ShippedLocale) => ({
    appName: branding.appName,
    logoUrl: branding.logoUrl ?? '',
    accentColor: branding.accentColor,
    accentTextColor,
    lang: locale,
  });
  const dateFormats = new Map<ShippedLocale, Intl.DateTimeFormat>();
  const formatTime = (locale: ShippedLocale, date: Date) => {
    let f = dateFormats.get(locale);
    if (!f) {
      f = new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'short', timeZone: 'UTC' });
      dateFormats.set(locale, f);
    }
    return `${f.format(date)} UTC`;
  };
  const typeLabel = (locale: ShippedLocale, type: string) =>
    (strings[locale].types as Record<string, string>)[type] ?? type;
  const notificationsUrl = `${branding.feBaseUrl}/notifications`;
  const preferencesUrl = `${branding.feBaseUrl}/preferences`;

  const run = (name: TemplateName, locale: ShippedLocale, part: Part, vars: object): string | null => {
    const entry = table.get(key(name, locale, part));
    if (!entry) return null;
    try {
      return entry.compiled(part === 'html' ? (escapeValues(vars) as object) : vars);
    } catch (err) {
      // Only reachable for a template that passed the start-up check with sample data; name it in the log.
      throw new Error(`email template ${entry.file ?? `${name}.${part}`}: ${(err as Error).message}`);
    }
  };

  /** The variables of one email kind, plus its default subject and preheader. */
  const prepare = (data: EmailData, locale: ShippedLocale) => {
    const s = strings[locale];
    const base = common(locale);
    switch (data.template) {
      case 'verify-email':
      case 'reset-password':
      case 'magic-link': {
        const t = { ...s.layout, ...s[data.template] };
        return {
          vars: { ...base, t, url: data.url },
          subject: t.subject,
          preheader: t.intro,
          unsubscribeLabel: '',
        };
      }
      case 'notification': {
        const t = { ...s.layout, ...s.notification };
        const label = typeLabel(locale, data.type);
        return {
          vars: {
            ...base,
            t,
            url: notificationsUrl,
            type: data.type,
            typeLabel: label,
            title: data.title,
            content: data.content,
          },
          subject: fill(t.subject, { title: data.title }),
          preheader: cut(data.content, 120),
          unsubscribeLabel: fill(t.unsubscribe, { type: label }),
        };
      }
      case 'digest': {
        const t = { ...s.layout, ...s.digest };
        const more = Math.max(0, data.total - data.items.length);
        const intro = fill(t.intro, {
          start: formatTime(locale, data.windowStart),
          end: formatTime(locale, data.windowEnd),
        });
        return {
          vars: {
            ...base,
            t,
            url: notificationsUrl,
            intro,
            count: data.total,
            moreCount: more,
            moreLabel: more > 0 ? fill(t.more, { count: more }) : '',
            items: data.items.map((item) => ({
              type: item.type,
              typeLabel: typeLabel(locale, item.type),
              title: item.title,
              content: cut(item.content, 280),
              time: formatTime(locale, item.createdAt),
            })),
          },
          subject: data.total === 1 ? t.subjectOne : fill(t.subjectMany, { count: data.total }),
          preheader: intro,
          unsubscribeLabel: t.unsubscribe,
        };
      }
    }
  };

  function render(data: EmailData, localeTag: string | null | undefined): RenderedEmail {
    const locale = resolveLocale(localeTag, branding.defaultLocale);
    const name: EmailName = data.template;
    const { vars, subject: defaultSubject, preheader, unsubscribeLabel } = prepare(data, locale);
    const subject = safeSubject(run(name, locale, 'subject.txt', vars) ?? defaultSubject);
    const unsubscribeUrl = 'unsubscribeUrl' in data ? data.unsubscribeUrl : '';
    const layoutVars = {
      ...common(locale),
      t: strings[locale].layout,
      subject,
      preheader,
      unsubscribeUrl,
      unsubscribeLabel,
      preferencesUrl,
      preferencesLabel:
        data.template === 'digest' || data.template === 'notification'
          ? strings[locale][data.template].preferences
          : '',
    };
    const html = run('layout', locale, 'html', {
      ...layoutVars,
      content: new Markup(run(name, locale, 'html', vars) ?? ''),
    });
    const text = run('layout', locale, 'txt', {
      ...layoutVars,
      content: (run(name, locale, 'txt', vars) ?? '').trim(),
    });
    const headers: Record<string, string> = { 'Content-Language': locale };
    if (unsubscribeUrl) {
      // RFC 8058 one-click: mailbox providers POST "List-Unsubscribe=One-Click" to the URL, with no cookie.
      headers['List-Unsubscribe'] = `<${unsubscribeUrl}>`;
      headers['List-Unsubscribe-Post'] = 'List-Unsubscribe=One-Click';
    }
    return {
      subject,
      html: html ?? '',
      text: `${(text ?? '').replace(/\n{3,}/g, '\n\n').trim()}\n`,
      headers,
      locale,
    };
  }

  // Start-up check: every template (bundled or overridden) renders each kind of email in each locale with sample
  // data; an override that does not parse, or names a variable that does not exist, stops start-up naming its file.
  const problems = new Set<string>();
  for (const locale of SHIPPED_LOCALES) {
    for (const sample of sampleData()) {
      try {
        render(sample, locale);
      } catch (err) {
        // One line per problem, like every other start-up error (Handlebars' parse errors span several).
        problems.add(`EMAIL_TEMPLATES_DIR: ${(err as Error).message.replace(/\s*\n[\s-]*\^?\s*/g, ' ')}`);
      }
    }
  }
  if (problems.size > 0) throw new ConfigError([...problems]);

  return {
    render,
    /** The shipped locale a user's tag resolves to. */
    localeOf: (tag: string | null | undefined) => resolveLocale(tag, branding.defaultLocale),
  };
}

export type EmailRenderer = ReturnType<typeof createEmailRenderer>;

/** One email of every kind, with every variable set (the start-up check and the docs' screenshots use them). */
export function sampleData(): EmailData[] {
  const url = 'https://app.example.com/verify-email?token=sample';
  const unsubscribeUrl = 'https://api.example.com/notification/unsubscribe?token=sample';
  const windowEnd = new Date(Date.UTC(2026, 0, 15, 10));
  return [
    { template: 'verify-email', url },
    { template: 'reset-password', url: url.replace('verify-email', 'reset-password') },
    { template: 'magic-link', url: url.replace('verify-email', 'magic-link') },
    {
      template: 'notification',
      type: 'mention',
      title: 'Ada mentioned you in #launch',
      content: '“Can you check the <release> notes before 5 pm?” — Ada',
      unsubscribeUrl,
    },
    {
      template: 'digest',
      items: [
        {
          type: 'mention',
          title: 'Ada mentioned you',
          content: 'Can you review this?',
          createdAt: windowEnd,
        },
        {
          type: 'announcement',
          title: 'Maintenance on Sunday',
          content: 'The service is read-only from 02:00 to 03:00 UTC.',
          createdAt: new Date(windowEnd.getTime() - 20 * 60_000),
        },
        {
          type: 'friend_request',
          title: 'Grace wants to connect',
          content: 'Grace Hopper sent you a friend request.',
          createdAt: new Date(windowEnd.getTime() - 45 * 60_000),
        },
      ],
      total: 5,
      windowStart: new Date(windowEnd.getTime() - 3_600_000),
      windowEnd,
      unsubscribeUrl,
    },
  ];
}
