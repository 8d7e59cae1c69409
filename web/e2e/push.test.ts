// Web Push in Chromium: the preferences page's "Enable push notifications" switch asks permission, registers
// the service worker at /sw.js and stores a subscription with the service; the device list shows and removes
// it; the service worker shows a pushed notification.
//
// Chromium's own push service (Google's FCM) cannot be reached from here, so its pushManager.subscribe() fails
// ("push service error"). The first test shows exactly that (the switch reports the failure, the service worker
// is registered, permission granted, nothing stored). The second replaces only that one browser call with a
// subscription pointing at the test's own push service on loopback (test/helpers/push-service.ts), so the rest
// of the path is real: SDK → service → queue → encrypted request → independent decryption; the decrypted
// message is then handed to the service worker through the DevTools protocol (ServiceWorker.deliverPushMessage)
// and the test reads the notification it showed.

import {
  CLUSTER_ORIGIN,
  startPushService,
  type TestCluster,
  type TestPushService,
} from '@herald/server/testkit';
import { type Browser, type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateVapidKeys } from '../../server/src/config.js';
import {
  ADMIN_EMAIL,
  apiCookie,
  CHROMIUM_ARGS,
  CHROMIUM_PATH,
  type E2EUser,
  screenshot,
  signInContext,
  startWebCluster,
  verifiedUser,
} from './harness';

const vapid = generateVapidKeys();

describe('Web Push in Chromium', () => {
  let cluster: TestCluster;
  let browser: Browser;
  let push: TestPushService;
  let admin: E2EUser;
  const contexts: BrowserContext[] = [];

  beforeAll(async () => {
    push = await startPushService({ vapidPublicKey: vapid.publicKey });
    // One after the other: on a loaded machine, Chromium starting alongside slows the instance's start-up.
    cluster = await startWebCluster({
      instances: 1,
      env: {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        VAPID_SUBJECT: 'mailto:ops@example.com',
        PUSH_ALLOW_PRIVATE_ENDPOINTS: 'true',
        PUSH_QUEUE_POLL_MS: '100',
      },
    });
    browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, headless: true });
    admin = await verifiedUser(cluster, 0, 'Ada Admin', ADMIN_EMAIL);
  });
  afterAll(async () => {
    await Promise.allSettled(contexts.map((c) => c.close()));
    await browser?.close();
    await cluster?.close();
    await push?.close();
  });

  const signedInPage = async (name: string) => {
    const base = cluster.url(0);
    const user = await verifiedUser(cluster, 0, name);
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    contexts.push(context);
    await context.grantPermissions(['notifications'], { origin: base });
    await signInContext(context, base, user);
    const page = await context.newPage();
    return { user, context, page, base };
  };

  const storedSubscriptions = async (user: E2EUser) => {
    const res = await fetch(`${cluster.url(0)}/notification/push/subscriptions`, {
      headers: { cookie: await apiCookie(cluster.url(0), user) },
    });
    return ((await res.json()) as { subscriptions: Array<{ id: string; endpoint: string }> }).subscriptions;
  };

  it('the switch asks permission and registers the service worker; Chromium’s push service is out of reach', async () => {
    const { user, page, base } = await signedInPage('Pia Push');
    await page.goto(`${base}/preferences`);
    const toggle = page.getByRole('switch', { name: 'Enable push notifications' });
    await toggle.waitFor();
    expect(await toggle.isChecked()).toBe(false);
    await toggle.click();
    // Either Chromium reached its push service (a subscription is stored) or it reports that it could not.
    await page.getByRole('alert').or(page.getByText('(this device)')).first().waitFor({ timeout: 60_000 });
    const state = await page.evaluate(async () => {
      const reg = await navigator.serviceWorker.getRegistration('/');
      return {
        permission: Notification.permission,
        script: reg?.active?.scriptURL ?? reg?.installing?.scriptURL ?? reg?.waiting?.scriptURL ?? null,
        scope: reg?.scope ?? null,
      };
    });
    expect(state.permission).toBe('granted');
    expect(state.script).toBe(`${base}/sw.js`);
    expect(state.scope).toBe(`${base}/`);
    const stored = await storedSubscriptions(user);
    if (stored.length === 0) {
      // The expected outcome here: the browser could not register with FCM, and said so.
      expect(await page.getByRole('alert').textContent()).toMatch(/push|registration|service/i);
    } else {
      expect(stored[0]?.endpoint).toMatch(/^https:\/\//);
    }
    await screenshot(page, 'preferences-push-offline-1280');
  });

  it('stores the subscription, lists the device, receives and shows a push, and removes the device', async () => {
    const { user, context, page, base } = await signedInPage('Pia Push Two');
    const fake = push.browser();
    // Only the browser's registration with its own push service is replaced (unreachable here): a subscription
    // whose endpoint and keys belong to the test's push service on loopback.
    await context.addInitScript((sub) => {
      const make = (options: PushSubscriptionOptionsInit) => ({
        endpoint: sub.endpoint,
        expirationTime: null,
        options: { applicationServerKey: options.applicationServerKey, userVisibleOnly: true },
        toJSON: () => sub,
        unsubscribe: async () => {
          localStorage.removeItem('fake-push');
          return true;
        },
      });
      const proto = PushManager.prototype as unknown as Record<string, unknown>;
      proto.subscribe = async (options: PushSubscriptionOptionsInit) => {
        localStorage.setItem('fake-push', '1');
        return make(options);
      };
      proto.getSubscription = async () =>
        localStorage.getItem('fake-push') ? make({ applicationServerKey: null }) : null;
    }, fake.subscription);
    await page.goto(`${base}/preferences`);
    const toggle = page.getByRole('switch', { name: 'Enable push notifications' });
    await toggle.click();
    await page.getByText('(this device)').waitFor();
    expect(await toggle.isChecked()).toBe(true);
    const stored = await storedSubscriptions(user);
    expect(stored.map((s) => s.endpoint)).toEqual([fake.subscription.endpoint]);
    // pushEnabled went on with the switch.
    await page.reload();
    expect(
      await page.getByLabel('Push notifications to my subscribed devices while I am offline').isChecked(),
    ).toBe(true);
    await page.close();

    // The user is offline (no stream): an admin send reaches the push service, verified and decrypted there.
    // `message` is not among the default email types, so email does not win over push.
    const sent = await fetch(`${cluster.url(0)}/admin/notifications/send`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        origin: CLUSTER_ORIGIN,
        cookie: await apiCookie(cluster.url(0), admin),
      },
      body: JSON.stringify({
        target: { scope: 'user', identifier: user.email },
        notification: { type: 'message', title: 'Pushed to Chromium', content: 'Open me' },
      }),
    });
    expect(sent.status).toBe(200);
    await push.until(() => push.accepted.some((m) => m.token === fake.token), 30_000);
    const message = push.accepted.find((m) => m.token === fake.token);
    expect(message?.payload.title).toBe('Pushed to Chromium');
    expect(push.errors).toEqual([]);

    // Hand the decrypted message to the service worker as the browser would, and read what it showed.
    const sw = await context.newPage();
    await sw.goto(`${base}/preferences`);
    await sw.getByText('(this device)').waitFor();
    const cdp = await context.newCDPSession(sw);
    const registrationId = await new Promise<string>((resolve) => {
      cdp.on('ServiceWorker.workerRegistrationUpdated', (e) => {
        const reg = e.registrations.find((r) => r.scopeURL === `${base}/` && !r.isDeleted);
        if (reg) resolve(reg.registrationId);
      });
      void cdp.send('ServiceWorker.enable');
    });
    // The worker must be active before a push reaches it; a message handed to a registration whose worker is
    // still starting can be dropped by Chromium, so the delivery is repeated (the notification's tag makes a
    // repeat replace, not add) until the worker has shown it.
    await sw.evaluate(async () => {
      const reg = await navigator.serviceWorker.ready;
      const worker = reg.active;
      if (worker && worker.state !== 'activated') {
        await new Promise<void>((resolve) =>
          worker.addEventListener('statechange', () => worker.state === 'activated' && resolve()),
        );
      }
    });
    const readShown = () =>
      sw.evaluate(async () => {
        const reg = await navigator.serviceWorker.getRegistration('/');
        const list = (await reg?.getNotifications()) ?? [];
        return list.length > 0 ? { title: list[0]?.title, body: list[0]?.body, data: list[0]?.data } : null;
      });
    let shown: Awaited<ReturnType<typeof readShown>> = null;
    for (let attempt = 0; attempt < 6 && shown === null; attempt++) {
      await cdp.send('ServiceWorker.deliverPushMessage', {
        origin: base,
        registrationId,
        data: JSON.stringify(message?.payload),
      });
      for (let i = 0; i < 25 && shown === null; i++) {
        await sw.waitForTimeout(200);
        shown = await readShown();
      }
    }
    expect(shown).toEqual({
      title: 'Pushed to Chromium',
      body: 'Open me',
      data: { url: `${base}/notifications`, id: message?.payload.id },
    });

    // Remove the device from the list: gone from the service and the browser.
    await sw.getByRole('button', { name: /^Remove .*\(this device\)$/ }).click();
    await sw.getByText('No device receives push notifications.').waitFor();
    expect(await storedSubscriptions(user)).toEqual([]);
    await screenshot(sw, 'preferences-push-1280');
  });
});
