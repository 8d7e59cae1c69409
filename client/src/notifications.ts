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

export interface NotificationsApi {
  list(q?: ListQuery): Promise<ListResponse>;
  counts(): Promise<CountsResponse>;
  unreadCount(): Promise<number>;
  setRead(id: string, read: boolean): Promise<Notification>;
  /** Resolves with the number of notifications marked read. */
  markAllRead(): Promise<number>;
  /** Resolves with the deleted notification's id. */
  remove(id: string): Promise<string>;
  /** Resolves with the number of notifications deleted. */
  removeAll(): Promise<number>;
  getPreferences(): Promise<Preferences>;
  updatePreferences(p: Partial<PreferencesInput>): Promise<Preferences>;
  /** Refreshes the caller's presence; resolves with the server's timestamp (epoch ms). */
  heartbeat(): Promise<number>;
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
