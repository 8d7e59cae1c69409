// Owns the notification feature's wire shapes (docs/api.md) and the server-side action URL rule.
import { z } from 'zod';
import { AppError } from '../http/errors.js';
import { noNul } from '../http/schemas.js';
import { NotificationErrorCode } from './errors.js';

export const NOTIFICATION_TYPES = [
  'system',
  'message',
  'friend_request',
  'mention',
  'announcement',
  'warning',
  'success',
  'info',
] as const;
export const NotificationTypeSchema = z.enum(NOTIFICATION_TYPES);
export type NotificationType = z.infer<typeof NotificationTypeSchema>;

export const DEFAULT_EMAIL_TYPES: NotificationType[] = [
  'friend_request',
  'mention',
  'announcement',
  'warning',
];
export const DEFAULT_PUSH_TYPES: NotificationType[] = ['message', 'friend_request', 'mention'];

export const METADATA_MAX_BYTES = 16 * 1024;

const NO_NUL_MESSAGE = 'must not contain NUL characters';
export const TitleSchema = z.string().min(1).max(255).refine(noNul, NO_NUL_MESSAGE);
export const ContentSchema = z.string().min(1).max(5000).refine(noNul, NO_NUL_MESSAGE);

/**
 * Serialised size of metadata, or null when it cannot be stored: a NUL in any key or string, or nesting so
 * deep that serialising it overflows the stack.
 */
function storableMetadataBytes(m: unknown): number | null {
  let nul = false;
  try {
    const json = JSON.stringify(m, (key, value) => {
      if (!noNul(key) || (typeof value === 'string' && !noNul(value))) nul = true;
      return value;
    });
    return nul ? null : Buffer.byteLength(json);
  } catch {
    return null;
  }
}

/** Nesting allowed inside metadata (objects and arrays), counting metadata itself as level 1. */
export const METADATA_MAX_DEPTH = 10;

/** True when `value` nests objects/arrays deeper than `max` levels. Iterative: any depth is safe to inspect. */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number];
    if (current === null || typeof current !== 'object') continue;
    if (depth > max) return true;
    for (const child of Object.values(current)) stack.push([child, depth + 1]);
  }
  return false;
}

/**
 * The form an action URL is stored in: absolute URLs as the URL parser writes them (`new URL(u).href`: scheme and
 * host lowercased, default port dropped, path percent-encoded), so what clients render is what was checked.
 * Paths, and anything the rule refuses anyway (control characters, whitespace, unparsable), stay as given: the
 * parser would silently strip or repair them and turn a refused URL into an accepted one.
 */
export function normaliseActionUrl(url: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: such URLs are refused, never repaired
  if (url.startsWith('/') || /[\u0000-\u001f\u007f\s\\]/.test(url)) return url;
  try {
    return new URL(url).href;
  } catch {
    return url;
  }
}

export const ActionSchema = z.strictObject({
  actionId: z.string().min(1).max(100),
  type: z.literal('link'),
  label: z.string().min(1).max(100),
  url: z
    .string()
    .min(1)
    .max(2048)
    .transform(normaliseActionUrl)
    .pipe(z.string().max(2048, 'URL is too long once normalised')),
  variant: z.enum(['default', 'destructive', 'outline', 'secondary', 'ghost', 'link']).optional(),
  openInNewTab: z.boolean().optional(),
});

export const MetadataSchema = z
  .strictObject({
    actions: z.array(ActionSchema).max(5).optional(),
    actionGroupVariant: z.string().min(1).max(50).optional(),
    priority: z.enum(['low', 'normal', 'high', 'urgent']).optional(),
    expiresAt: z.iso.datetime({ offset: true }).optional(),
    data: z.record(z.string(), z.unknown()).optional(),
  })
  // Before the size check: deep nesting costs every recursive consumer (serialisers, canonicalisation) stack.
  .refine((m) => !nestsDeeperThan(m, METADATA_MAX_DEPTH), {
    message: `metadata must not nest deeper than ${METADATA_MAX_DEPTH} levels`,
    abort: true,
  })
  .refine(
    (m) => {
      const bytes = storableMetadataBytes(m);
      return bytes !== null && bytes <= METADATA_MAX_BYTES;
    },
    {
      message: `metadata must be at most ${METADATA_MAX_BYTES} bytes when serialised, without NUL characters`,
    },
  );
export type Metadata = z.infer<typeof MetadataSchema>;

export const NewNotificationSchema = z.strictObject({
  type: NotificationTypeSchema,
  title: TitleSchema,
  content: ContentSchema,
  metadata: MetadataSchema.optional(),
});
export type NewNotification = z.infer<typeof NewNotificationSchema>;

export const DELIVERY_STRATEGIES = ['sse', 'email', 'push'] as const;
export const StrategyNameSchema = z.enum(DELIVERY_STRATEGIES);
export type StrategyName = z.infer<typeof StrategyNameSchema>;

/**
 * An ISO 8601 UTC timestamp as the service writes it (`Date#toISOString`). Documented as `date-time` without
 * re-validating on output: the values are produced by the server, never taken from input.
 */
export const Timestamp = z.string().meta({ format: 'date-time', example: '2025-01-01T12:00:00.000Z' });

export const NotificationSchema = z
  .object({
    id: z.string(),
    userId: z.string(),
    type: NotificationTypeSchema,
    title: z.string(),
    content: z.string(),
    metadata: z.record(z.string(), z.unknown()),
    read: z.boolean(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({
    example: {
      id: '5b0e7a56-3f59-4a4e-9a51-7c1d3c2f8e10',
      userId: 'Yx3kq0H2bq7sTQ1mB9dZ4Lw8',
      type: 'mention',
      title: 'Ada mentioned you',
      content: 'Ada mentioned you in #general',
      metadata: {
        priority: 'normal',
        actions: [{ actionId: 'open', type: 'link', label: 'Open', url: '/chat' }],
      },
      read: false,
      createdAt: '2025-01-01T12:00:00.000Z',
      updatedAt: '2025-01-01T12:00:00.000Z',
    },
  });
export type Notification = z.infer<typeof NotificationSchema>;

/** CONTRACT §12: notification emails one by one (off), or gathered into one digest per hour or day. */
export const EmailDigestSchema = z
  .enum(['off', 'hourly', 'daily'])
  .describe('off: one email per notification; hourly/daily: one digest email per window (docs/email.md)');
export type EmailDigest = z.infer<typeof EmailDigestSchema>;

export const PreferencesSchema = z
  .object({
    emailEnabled: z.boolean(),
    pushEnabled: z.boolean(),
    emailTypes: z.array(NotificationTypeSchema),
    pushTypes: z.array(NotificationTypeSchema),
    emailDigest: EmailDigestSchema,
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({
    example: {
      emailEnabled: true,
      pushEnabled: false,
      emailTypes: DEFAULT_EMAIL_TYPES,
      pushTypes: DEFAULT_PUSH_TYPES,
      emailDigest: 'off',
      createdAt: '2025-01-01T12:00:00.000Z',
      updatedAt: '2025-01-01T12:00:00.000Z',
    },
  });
export type Preferences = z.infer<typeof PreferencesSchema>;

export const PreferencesPatchSchema = z.strictObject({
  emailEnabled: z.boolean().optional(),
  pushEnabled: z.boolean().optional(),
  // null restores the default set.
  emailTypes: z.array(NotificationTypeSchema).max(50).nullable().optional(),
  pushTypes: z.array(NotificationTypeSchema).max(50).nullable().optional(),
  emailDigest: EmailDigestSchema.optional(),
});
export type PreferencesPatch = z.infer<typeof PreferencesPatchSchema>;

export const ListQuerySchema = z.object({
  page: z.coerce.number().int().min(1).max(1_000_000).default(1),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  filter: z.enum(['all', 'read', 'unread']).default('all'),
  type: NotificationTypeSchema.optional(),
  search: z.string().max(200).refine(noNul, NO_NUL_MESSAGE).optional(),
});
export type ListQuery = z.infer<typeof ListQuerySchema>;

export const PaginationSchema = z.object({
  page: z.number().int(),
  limit: z.number().int(),
  totalCount: z.number().int(),
  totalPages: z.number().int(),
  hasNextPage: z.boolean(),
  hasPreviousPage: z.boolean(),
});

/** The body of `GET /notification/list`. */
export const ListResponseSchema = z
  .object({ notifications: z.array(NotificationSchema), pagination: PaginationSchema })
  .describe('One page of the caller’s notifications and the paging figures');
export type ListResponse = z.infer<typeof ListResponseSchema>;

/**
 * The first-page queries the read cache keeps (the bell's polled query and its unread filter); its signature, or
 * null for a query that always goes to PostgreSQL (later pages, type and search filters).
 */
export function cachedPageSignature(q: ListQuery): string | null {
  return q.page === 1 && q.type === undefined && q.search === undefined ? `${q.filter}:${q.limit}` : null;
}

export const CountsSchema = z.object({
  byStatus: z.object({ all: z.number().int(), read: z.number().int(), unread: z.number().int() }),
  byType: z.object(
    Object.fromEntries(NOTIFICATION_TYPES.map((t) => [t, z.number().int()])) as Record<
      NotificationType,
      z.ZodNumber
    >,
  ),
});
export type Counts = z.infer<typeof CountsSchema>;

export interface ActionUrlPolicy {
  /** `host` of FE_BASE_URL: hostname plus the port when it is not the scheme's default. */
  feHost: string;
  /** ACTION_ALLOWED_DOMAINS entries: a hostname (default port) or `hostname:port`. */
  allowedHosts: string[];
}

export function actionUrlPolicy(feBaseUrl: string, allowedDomains: string[]): ActionUrlPolicy {
  return {
    feHost: new URL(feBaseUrl).host.toLowerCase(),
    allowedHosts: allowedDomains.map((d) => d.toLowerCase()),
  };
}

/**
 * A path on the front end (single leading slash), or http(s) on the front end's host or an allowlisted host
 * (hostname and port both match; a default port may be written or left out).
 * Browsers treat `//host` and `/\host` as protocol-relative, so both are refused along with control characters.
 */
export function isAllowedActionUrl(url: string, policy: ActionUrlPolicy): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
  if (/[\u0000-\u001f\u007f\s\\]/.test(url)) return false;
  if (url.startsWith('/')) return !url.startsWith('//');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return false;
  if (parsed.username || parsed.password) return false;
  // The port is part of the host: another port on the same machine is another application (another origin).
  const host = parsed.host.toLowerCase();
  return host === policy.feHost || policy.allowedHosts.includes(host);
}

/** Throws 400 ACTION_URL_NOT_ALLOWED for the first action whose URL breaks the rule. */
export function assertActionUrls(metadata: Metadata | undefined, policy: ActionUrlPolicy, path = 'metadata') {
  const actions = metadata?.actions ?? [];
  actions.forEach((action, i) => {
    if (!isAllowedActionUrl(action.url, policy)) {
      throw new AppError(
        400,
        NotificationErrorCode.ACTION_URL_NOT_ALLOWED,
        'Action URLs must be a path starting with a single "/" or an http(s) URL on an allowed host',
        [{ path: `${path}.actions.${i}.url`, message: 'URL not allowed' }],
      );
    }
  });
}
