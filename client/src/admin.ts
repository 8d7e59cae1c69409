// Administrator calls of Herald's own routes (the better-auth admin plugin is on `client.auth.admin`).
import type { BroadcastRequest, BroadcastResult, MetricsReport, PurgeMessagesResponse } from './contract.js';
import type { Http } from './http.js';

/** `client.admin`: Herald's own admin routes (an admin session). */
export interface AdminApi {
  /**
   * POST /admin/notifications/send; `idempotencyKey` makes a retry return the first result without resending.
   * @example
   * const result = await client.admin.sendNotification(
   *   { target: { scope: 'all' }, notification: { type: 'announcement', title: 'Hello', content: 'Welcome!' } },
   *   { idempotencyKey: crypto.randomUUID() },
   * );
   */
  sendNotification(body: BroadcastRequest, opts?: { idempotencyKey?: string }): Promise<BroadcastResult>;
  /**
   * DELETE /admin/users/:id/messages; resolves with the number of chat messages deleted.
   * @example
   * const deleted = await client.admin.purgeMessages(userId);
   */
  purgeMessages(userId: string): Promise<number>;
  /**
   * GET /metrics (JSON).
   * @example
   * const { cluster } = await client.admin.metrics();
   */
  metrics(): Promise<MetricsReport>;
}

export function createAdminApi(http: Http): AdminApi {
  return {
    sendNotification: (body, opts) =>
      http.request<BroadcastResult>('POST', '/admin/notifications/send', {
        body,
        headers: opts?.idempotencyKey ? { 'idempotency-key': opts.idempotencyKey } : undefined,
      }),
    purgeMessages: async (userId) =>
      (
        await http.request<PurgeMessagesResponse>(
          'DELETE',
          `/admin/users/${encodeURIComponent(userId)}/messages`,
        )
      ).deletedCount,
    metrics: () => http.request<MetricsReport>('GET', '/metrics'),
  };
}
