// The notification feature's row shapes and their mapping to API objects, shared by the repositories
// (repository.ts: notifications; event-log.ts: the per-user event log; preferences-repository.ts: preferences).
import { sql } from 'drizzle-orm';
import {
  DEFAULT_EMAIL_TYPES,
  DEFAULT_PUSH_TYPES,
  type EmailDigest,
  type Notification,
  type NotificationType,
  type Preferences,
} from './schemas.js';

export interface NotificationRow {
  id: string;
  user_id: string;
  type: NotificationType;
  title: string;
  content: string;
  metadata: Record<string, unknown> | null;
  read: boolean;
  created_at: Date | string;
  updated_at: Date | string;
}

// PostgreSQL's text for a timestamptz in a UTC session ("2026-11-27 09:01:00.123456+00"): rewritten as the ISO
// string Date would give (milliseconds truncated, as Date parses them) without building a Date, which was most of
// the cost of mapping a list page's rows (36 of 42 µs for 20 rows). Anything else (another session time zone, a
// year before 1000) goes through Date as before; test/notifications/rows.test.ts holds the two paths equal.
const PG_UTC_TIMESTAMP = /^([1-9]\d{3}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?\+00$/;

export const iso = (v: Date | string): string => {
  if (typeof v === 'string') {
    const m = PG_UTC_TIMESTAMP.exec(v);
    if (m) return `${m[1]}T${m[2]}.${(m[3] ?? '').padEnd(3, '0').slice(0, 3)}Z`;
    return new Date(v).toISOString();
  }
  return v.toISOString();
};

export type StoredNotification = Notification;

export function toNotification(row: NotificationRow): Notification {
  return {
    id: row.id,
    userId: row.user_id,
    type: row.type,
    title: row.title,
    content: row.content,
    metadata: row.metadata ?? {},
    read: row.read,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}

/** The notification columns a page and the API object need, in a raw statement's select list. */
export const NOTIFICATION_COLUMNS = sql.raw(
  'id, user_id, type, title, content, metadata, read, created_at, updated_at',
);

export const N_COLUMNS = sql.raw(
  'n.id, n.user_id, n.type, n.title, n.content, n.metadata, n.read, n.created_at, n.updated_at',
);

/** The SSE events that change a user's state; each gets the user's next seq and a row in the event log. */
export const LOGGED_EVENT_KINDS = [
  'new_notification',
  'notification_updated',
  'notification_deleted',
  'notifications_cleared',
  'unread_count_changed',
] as const;
export type LoggedEventKind = (typeof LOGGED_EVENT_KINDS)[number];

/** One event as written to the log: a notification reference or small data, never notification content. */
export interface LogEntry {
  kind: LoggedEventKind;
  notificationId?: string;
  data?: Record<string, unknown>;
}

/** A committed, sequenced event as published on the bus and replayed to streams. */
export interface SeqEvent {
  seq: number;
  name: LoggedEventKind;
  data: Record<string, unknown>;
}

/** A user's cursor: the newest seq issued, the unread count, and the oldest seq still in the log. */
export interface UserCursor {
  lastSeq: number;
  unread: number;
  /** Oldest logged seq, or null when the log holds nothing for the user (pruned or never written). */
  oldestSeq: number | null;
}

export interface EventRow extends Partial<NotificationRow> {
  seq: string;
  kind: LoggedEventKind;
  data: Record<string, unknown> | null;
  nid: string | null;
}

export interface EmailRecipient {
  userId: string;
  notificationId: string;
  email: string;
  /** The user's BCP 47 tag, or null for DEFAULT_LOCALE. */
  locale: string | null;
  digest: EmailDigest;
  /** The notification's created_at (database clock), epoch ms. */
  createdAtMs: number;
}

export interface PreferenceRow {
  email_enabled: boolean;
  push_enabled: boolean;
  email_types: string[] | null;
  push_types: string[] | null;
  email_digest: string;
  created_at: Date | string;
  updated_at: Date | string;
}

export function toPreferences(row: PreferenceRow): Preferences {
  return {
    emailEnabled: row.email_enabled,
    pushEnabled: row.push_enabled,
    emailTypes: (row.email_types ?? DEFAULT_EMAIL_TYPES) as NotificationType[],
    pushTypes: (row.push_types ?? DEFAULT_PUSH_TYPES) as NotificationType[],
    emailDigest: row.email_digest === 'hourly' || row.email_digest === 'daily' ? row.email_digest : 'off',
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
  };
}
