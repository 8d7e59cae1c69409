// Every notification call of the contract (docs/api.md), plus the live feed.
import type {
  CountsResponse,
  ListQuery,
  ListResponse,
  Notification,
  Preferences,
  PreferencesInput,
} from './contract.js';
import type { NotificationFeed } from './feed.js';
import type { Http } from './http.js';
import type { PushApi } from './push.js';

/** `client.notifications`: every call of CONTRACT §2 (each throws HeraldApiError on a non-2xx answer), and the feed. */
export interface NotificationsApi {
  /**
   * GET /notification/list: a page, newest first.
   * @example
   * const { notifications, pagination } = await client.notifications.list({ filter: 'unread', limit: 20 });
   */
  list(q?: ListQuery): Promise<ListResponse>;
  /**
   * GET /notification/counts: by status and by type.
   * @example
   * const { counts } = await client.notifications.counts();
   * console.log(counts.byStatus.unread, counts.byType.mention);
   */
  counts(): Promise<CountsResponse>;
  /**
   * GET /notification/unread-count.
   * @example
   * const unread = await client.notifications.unreadCount();
   */
  unreadCount(): Promise<number>;
  /**
   * PATCH /notification/:id/read; resolves with the updated notification.
   * @example
   * await client.notifications.setRead(notification.id, true);
   */
  setRead(id: string, read: boolean): Promise<Notification>;
  /**
   * PATCH /notification/mark-all-read; resolves with the number of notifications marked read.
   * @example
   * const updated = await client.notifications.markAllRead();
   */
  markAllRead(): Promise<number>;
  /**
   * DELETE /notification/:id; resolves with the deleted notification's id.
   * @example
   * await client.notifications.remove(notification.id);
   */
  remove(id: string): Promise<string>;
  /**
   * DELETE /notification/delete-all; resolves with the number of notifications deleted.
   * @example
   * const deleted = await client.notifications.removeAll();
   */
  removeAll(): Promise<number>;
  /**
   * GET /notification/preferences (created with defaults on first read).
   * @example
   * const { emailEnabled, emailTypes } = await client.notifications.getPreferences();
   */
  getPreferences(): Promise<Preferences>;
  /**
   * PATCH /notification/preferences: the given fields replace the stored ones.
   * @example
   * await client.notifications.updatePreferences({ emailEnabled: false });
   */
  updatePreferences(p: Partial<PreferencesInput>): Promise<Preferences>;
  /**
   * POST /notification/heartbeat: refreshes the caller's presence; resolves with the server's time (epoch ms).
   * @example
   * const serverTime = await client.notifications.heartbeat();
   */
  heartbeat(): Promise<number>;
  /** The live feed over one SSE connection (see NotificationFeed). */
  feed: NotificationFeed;
  /** Web Push for this browser: subscribe / unsubscribe / list (docs/api.md#web-push). */
  push: PushApi;
}

export type NotificationCalls = Omit<NotificationsApi, 'feed' | 'push'>;

export function createNotificationCalls(http: Http): NotificationCalls {
  const id = (v: string) => encodeURIComponent(v);
  return {
    list: (q = {}) =>
      http.request<ListResponse>('GET', '/notification/list', {
        query: { page: q.page, limit: q.limit, filter: q.filter, type: q.type, search: q.search },
      }),
    counts: () => http.request<CountsResponse>('GET', '/notification/counts'),
    unreadCount: async () =>
      (await http.request<{ unreadCount: number }>('GET', '/notification/unread-count')).unreadCount,
    setRead: async (nid, read) =>
      (
        await http.request<{ notification: Notification }>('PATCH', `/notification/${id(nid)}/read`, {
          body: { read },
        })
      ).notification,
    markAllRead: async () =>
      (await http.request<{ updatedCount: number }>('PATCH', '/notification/mark-all-read')).updatedCount,
    remove: async (nid) =>
      (await http.request<{ notificationId: string }>('DELETE', `/notification/${id(nid)}`)).notificationId,
    removeAll: async () =>
      (await http.request<{ deletedCount: number }>('DELETE', '/notification/delete-all')).deletedCount,
    getPreferences: async () =>
      (await http.request<{ preferences: Preferences }>('GET', '/notification/preferences')).preferences,
    updatePreferences: async (p) =>
      (await http.request<{ preferences: Preferences }>('PATCH', '/notification/preferences', { body: p }))
        .preferences,
    heartbeat: async () =>
      (await http.request<{ timestamp: number }>('POST', '/notification/heartbeat')).timestamp,
  };
}
