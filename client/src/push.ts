// Web Push for this browser (docs/api.md#web-push): subscribe (permission → service worker → PushManager →
// POST), unsubscribe, and the caller's subscribed browsers.
import type { PushSubscriptionInput, PushSubscriptionView } from './contract.js';
import { HeraldApiError } from './errors.js';
import type { Http } from './http.js';

export interface PushSubscribeOptions {
  /** The service worker script that shows the notifications; default `/sw.js` (the web app's). */
  serviceWorkerUrl?: string;
  /** Its scope; default `/`. */
  scope?: string;
  /** How long the browser may take to register with its push service; default 30 s. */
  timeoutMs?: number;
}

export interface PushApi {
  /** True when this environment can receive Web Push (service workers, PushManager and notifications). */
  supported(): boolean;
  /**
   * Asks for notification permission (when not decided yet), registers the service worker, subscribes this
   * browser with the server's VAPID key and stores the subscription. Safe to call again: the same browser keeps
   * one subscription (200 from the server), re-created when the server's key changed (key rotation).
   * Throws HeraldApiError `PUSH_UNSUPPORTED`, `PUSH_PERMISSION_DENIED`, `PUSH_SUBSCRIBE_FAILED` (the browser
   * could not register with its push service, e.g. offline, within `timeoutMs`), or the server's error (e.g. 404
   * `PUSH_NOT_CONFIGURED`).
   * @example
   * const subscription = await client.notifications.push.subscribe();
   * await client.notifications.updatePreferences({ pushEnabled: true });
   */
  subscribe(options?: PushSubscribeOptions): Promise<PushSubscriptionView>;
  /**
   * Removes this browser's subscription from the server and the browser. Resolves false when it had none.
   * @example
   * await client.notifications.push.unsubscribe();
   */
  unsubscribe(options?: Pick<PushSubscribeOptions, 'scope'>): Promise<boolean>;
  /**
   * The caller's subscribed browsers (devices), most recently subscribed first.
   * @example
   * const devices = await client.notifications.push.list();
   */
  list(): Promise<PushSubscriptionView[]>;
  /**
   * Removes one subscribed browser by id (another device's too); resolves with its id.
   * @example
   * await client.notifications.push.remove(devices[0].id);
   */
  remove(id: string): Promise<string>;
  /**
   * This browser's current push endpoint, or null when it is not subscribed (to mark "this device" in a list).
   * @example
   * const mine = await client.notifications.push.currentEndpoint();
   */
  currentEndpoint(options?: Pick<PushSubscribeOptions, 'scope'>): Promise<string | null>;
}

interface PushGlobals {
  navigator?: { serviceWorker?: ServiceWorkerContainer };
  PushManager?: unknown;
  Notification?: { permission: NotificationPermission; requestPermission(): Promise<NotificationPermission> };
}

const g = () => globalThis as unknown as PushGlobals;

/** base64url → bytes (applicationServerKey). */
export function base64UrlToBytes(value: string): Uint8Array<ArrayBuffer> {
  const base64 = value
    .replace(/-/g, '+')
    .replace(/_/g, '/')
    .padEnd(Math.ceil(value.length / 4) * 4, '=');
  const binary = atob(base64);
  const bytes = new Uint8Array(new ArrayBuffer(binary.length));
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

const sameKey = (a: ArrayBuffer | null | undefined, b: Uint8Array): boolean => {
  if (!a) return false;
  const x = new Uint8Array(a);
  return x.length === b.length && x.every((v, i) => v === b[i]);
};

export function createPushApi(http: Http): PushApi {
  const supported = () => {
    const globals = g();
    return Boolean(globals.navigator?.serviceWorker && globals.PushManager && globals.Notification);
  };
  const registration = async (scope = '/') => {
    const container = g().navigator?.serviceWorker;
    return container ? ((await container.getRegistration(scope)) ?? null) : null;
  };
  const list = async () =>
    (await http.request<{ subscriptions: PushSubscriptionView[] }>('GET', '/notification/push/subscriptions'))
      .subscriptions;
  const remove = async (id: string) =>
    (
      await http.request<{ id: string }>(
        'DELETE',
        `/notification/push/subscriptions/${encodeURIComponent(id)}`,
      )
    ).id;

  return {
    supported,
    list,
    remove,
    async subscribe(options = {}) {
      const globals = g();
      const container = globals.navigator?.serviceWorker;
      if (!supported() || !container || !globals.Notification) {
        throw new HeraldApiError(0, 'PUSH_UNSUPPORTED', 'This browser cannot receive Web Push notifications');
      }
      let permission = globals.Notification.permission;
      if (permission === 'default') permission = await globals.Notification.requestPermission();
      if (permission !== 'granted') {
        throw new HeraldApiError(0, 'PUSH_PERMISSION_DENIED', 'Notification permission was not granted');
      }
      const { publicKey } = await http.request<{ publicKey: string }>('GET', '/notification/push/public-key');
      const key = base64UrlToBytes(publicKey);
      const scope = options.scope ?? '/';
      await container.register(options.serviceWorkerUrl ?? '/sw.js', { scope });
      const reg = await container.ready;
      let sub = await reg.pushManager.getSubscription();
      if (sub && !sameKey(sub.options.applicationServerKey, key)) {
        // Subscribed with a previous key (rotation): the push service would refuse our tokens for it.
        await sub.unsubscribe();
        sub = null;
      }
      if (!sub) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const timeoutMs = options.timeoutMs ?? 30_000;
        try {
          sub = await Promise.race([
            reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key }),
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
            }),
          ]);
        } catch (err) {
          throw new HeraldApiError(
            0,
            'PUSH_SUBSCRIBE_FAILED',
            `The browser could not register with its push service: ${(err as Error).message || String(err)}`,
          );
        } finally {
          clearTimeout(timer);
        }
      }
      const json = sub.toJSON() as PushSubscriptionInput;
      const body: PushSubscriptionInput = {
        endpoint: json.endpoint,
        expirationTime: json.expirationTime ?? null,
        keys: { p256dh: json.keys.p256dh, auth: json.keys.auth },
      };
      return (
        await http.request<{ subscription: PushSubscriptionView }>(
          'POST',
          '/notification/push/subscriptions',
          {
            body,
          },
        )
      ).subscription;
    },
    async unsubscribe(options = {}) {
      const reg = await registration(options.scope);
      const sub = reg ? await reg.pushManager.getSubscription() : null;
      if (!sub) return false;
      const mine = (await list()).find((s) => s.endpoint === sub.endpoint);
      if (mine) await remove(mine.id);
      await sub.unsubscribe();
      return true;
    },
    async currentEndpoint(options = {}) {
      const reg = await registration(options.scope);
      const sub = reg ? await reg.pushManager.getSubscription() : null;
      return sub?.endpoint ?? null;
    },
  };
}
