// notifications.push against stand-ins for the browser's service worker, PushManager and Notification APIs
// (Node has none) and a fetch that records the calls: permission, registration, key, POST body, rotation.
import { afterEach, describe, expect, it } from 'vitest';
import { createHttp } from '../src/http.js';
import { base64UrlToBytes, HeraldApiError } from '../src/index.js';
import { createPushApi } from '../src/push.js';

const KEY = 'BAtIzr3L4gXWolp6UlxijWXc1zKmAA90MQ_sxtFvBriJPTQ5l-3C2-G7x8jndYNu67mPw_AvUG7pDV5LdvvoYZA';
const saved = { ...globalThis } as Record<string, unknown>;

function install(options: { permission: NotificationPermission; existingKey?: Uint8Array | null }) {
  const calls: string[] = [];
  let current: unknown = null;
  const makeSub = (key: Uint8Array | null, endpoint: string) => ({
    endpoint,
    options: { applicationServerKey: key ? key.buffer : null },
    toJSON: () => ({ endpoint, expirationTime: null, keys: { p256dh: 'p', auth: 'a' } }),
    unsubscribe: async () => {
      calls.push(`unsubscribe ${endpoint}`);
      current = null;
      return true;
    },
  });
  if (options.existingKey !== undefined) current = makeSub(options.existingKey, 'https://push.example/old');
  const pushManager = {
    getSubscription: async () => current,
    subscribe: async (o: { applicationServerKey: Uint8Array; userVisibleOnly: boolean }) => {
      calls.push(
        `subscribe ${o.userVisibleOnly} ${Buffer.from(o.applicationServerKey).toString('base64url')}`,
      );
      current = makeSub(o.applicationServerKey, 'https://push.example/new');
      return current;
    },
  };
  const reg = { pushManager };
  Object.assign(globalThis, {
    PushManager: class {},
    Notification: {
      permission: options.permission,
      requestPermission: async () => {
        calls.push('requestPermission');
        return 'denied';
      },
    },
  });
  Object.defineProperty(globalThis, 'navigator', {
    configurable: true,
    value: {
      serviceWorker: {
        register: async (url: string, o: { scope: string }) => {
          calls.push(`register ${url} ${o.scope}`);
          return reg;
        },
        ready: Promise.resolve(reg),
        getRegistration: async () => reg,
      },
    },
  });
  const requests: Array<{ method: string; url: string; body: unknown }> = [];
  const fetchImpl = (async (url: string, init: RequestInit) => {
    requests.push({
      method: init.method ?? 'GET',
      url,
      body: init.body ? JSON.parse(String(init.body)) : null,
    });
    const json = url.endsWith('/public-key')
      ? { publicKey: KEY }
      : init.method === 'POST'
        ? { subscription: { id: 's1', endpoint: 'https://push.example/new' } }
        : { subscriptions: [{ id: 's1', endpoint: 'https://push.example/new' }] };
    return new Response(JSON.stringify(json), {
      status: 200,
      headers: { 'content-type': 'application/json' },
    });
  }) as typeof fetch;
  return { calls, requests, push: createPushApi(createHttp('https://api.example', fetchImpl)) };
}

afterEach(() => {
  for (const k of ['PushManager', 'Notification']) delete (globalThis as Record<string, unknown>)[k];
  Object.defineProperty(globalThis, 'navigator', { configurable: true, value: saved.navigator });
});

describe('notifications.push', () => {
  it('decodes base64url keys', () => {
    expect(Buffer.from(base64UrlToBytes(KEY)).toString('base64url')).toBe(KEY);
    expect(base64UrlToBytes(KEY).length).toBe(65);
  });

  it('subscribes: service worker, the server key, userVisibleOnly, then POST', async () => {
    const { calls, requests, push } = install({ permission: 'granted' });
    expect(push.supported()).toBe(true);
    const sub = await push.subscribe();
    expect(sub.id).toBe('s1');
    expect(calls).toEqual(['register /sw.js /', `subscribe true ${KEY}`]);
    const post = requests.find((r) => r.method === 'POST');
    expect(post?.url).toBe('https://api.example/notification/push/subscriptions');
    expect(post?.body).toEqual({
      endpoint: 'https://push.example/new',
      expirationTime: null,
      keys: { p256dh: 'p', auth: 'a' },
    });
  });

  it('re-subscribes a browser subscribed with another key (rotation)', async () => {
    const { calls, push } = install({ permission: 'granted', existingKey: new Uint8Array(65).fill(4) });
    await push.subscribe();
    expect(calls).toContain('unsubscribe https://push.example/old');
    expect(calls.at(-1)).toBe(`subscribe true ${KEY}`);
  });

  it('keeps a subscription made with the current key', async () => {
    const { calls, push } = install({ permission: 'granted', existingKey: base64UrlToBytes(KEY) });
    await push.subscribe();
    expect(calls.filter((c) => c.startsWith('subscribe') || c.startsWith('unsubscribe'))).toEqual([]);
  });

  it('asks permission and reports a refusal', async () => {
    const { calls, requests, push } = install({ permission: 'default' });
    const err = await push.subscribe().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HeraldApiError);
    expect((err as HeraldApiError).code).toBe('PUSH_PERMISSION_DENIED');
    expect(calls).toEqual(['requestPermission']);
    expect(requests).toEqual([]);
  });

  it('unsubscribes this browser on the server and in the browser', async () => {
    const { calls, requests, push } = install({ permission: 'granted' });
    await push.subscribe();
    expect(await push.currentEndpoint()).toBe('https://push.example/new');
    expect(await push.unsubscribe()).toBe(true);
    expect(requests.at(-1)).toMatchObject({
      method: 'DELETE',
      url: 'https://api.example/notification/push/subscriptions/s1',
    });
    expect(calls.at(-1)).toBe('unsubscribe https://push.example/new');
    expect(await push.unsubscribe()).toBe(false);
  });
});
