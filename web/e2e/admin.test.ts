// The admin pages for API keys and webhooks (CONTRACT §9) and the app in German (issue 26 item 3), in Chromium
// against two real Herald processes. Keys made in the UI are used by a "backend" (fetch from this test) and stop
// working once revoked in the UI; webhooks deliver to a real receiver on loopback, which checks the signature with
// the secret the UI showed. Both pages at 1280 px and 375 px, no console errors. A German user gets the app and the
// SDK's drop-in components (bell, inbox, chat, room list) in German, with the contract's names unchanged.
import type { TestCluster, WebhookReceiver } from '@herald/server/testkit';
import { CLUSTER_ORIGIN, startReceiver, verifySignature } from '@herald/server/testkit';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  ADMIN_EMAIL,
  adminSend,
  apiCookie,
  ConsoleWatch,
  DESKTOP,
  type E2EUser,
  launchBrowser,
  PHONE,
  resetWatch,
  screenshot,
  signInContext,
  startWebCluster,
  verifiedUser,
} from './harness';

/**
 * Nothing makes the page scroll sideways (it is usable at this width); when something does, the elements that
 * stick out, to say which.
 */
async function overflowing(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    document.documentElement.scrollWidth <= window.innerWidth
      ? []
      : [...document.querySelectorAll('body *')]
          .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1)
          .slice(0, 8)
          .map((el) => `${el.tagName.toLowerCase()}.${el.className}: ${el.getBoundingClientRect().right}`),
  );
}

describe('admin pages: API keys and webhooks; the app in German', () => {
  let cluster: TestCluster;
  let browser: Browser;
  let receiver: WebhookReceiver;
  let admin: E2EUser;
  const contexts: BrowserContext[] = [];
  const watch = new ConsoleWatch();
  const url = (i: number) => cluster.url(i);

  const newContext = async (options: { viewport?: typeof DESKTOP; locale?: string } = {}) => {
    const context = await browser.newContext({
      viewport: options.viewport ?? DESKTOP,
      locale: options.locale,
    });
    watch.attach(context);
    contexts.push(context);
    return context;
  };

  /** POST /admin/notifications/send as a backend with an API key (no session, no browser). */
  const sendWithKey = (key: string, identifier: string) =>
    fetch(`${url(1)}/admin/notifications/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({
        target: { scope: 'user', identifier },
        notification: { type: 'system', title: 'From a backend', content: 'Sent with an API key' },
      }),
    });

  beforeAll(async () => {
    [cluster, browser, receiver] = await Promise.all([
      // The receiver listens on loopback, which webhooks refuse unless this is set (development and tests).
      startWebCluster({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_QUEUE_POLL_MS: '200' } }),
      launchBrowser(),
      startReceiver(),
    ]);
    admin = await verifiedUser(cluster, 0, 'Ada Admin', ADMIN_EMAIL);
  });

  beforeEach(() => resetWatch(watch));

  afterAll(async () => {
    await Promise.allSettled(contexts.map((c) => c.close()));
    await browser?.close();
    await receiver?.close();
    await cluster?.close();
  });

  it('an admin creates an API key, a backend sends with it, and it stops working once revoked', async () => {
    const recipient = await verifiedUser(cluster, 1, 'Rita Recipient');
    const context = await newContext();
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url(0) });
    await signInContext(context, url(0), admin);
    const page = await context.newPage();
    await page.goto(`${url(0)}/admin`);
    await page.getByRole('navigation', { name: 'Primary' }).getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
    expect(await page.title()).toBe('API keys · Herald');

    // The service's own error, in the contract's shape, reaches the page (an expiry in the past is refused).
    watch.allowed = [/status of 400/];
    await page.getByLabel('Key name').fill('billing-service');
    await page.getByLabel('Expires (optional)').fill('2020-01-01T00:00');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('alert').filter({ hasText: 'body.expiresAt: must be in the future' }).waitFor();
    watch.allowed = [];

    await page.getByLabel('Expires (optional)').fill('');
    const sendScope = page.getByRole('checkbox', { name: /notifications:send/ });
    expect(await sendScope.isChecked()).toBe(true);
    await page.getByRole('button', { name: 'Create key' }).click();
    const field = page.getByRole('textbox', { name: 'New API key' });
    await field.waitFor();
    const key = await field.inputValue();
    expect(key).toMatch(/^hk_[A-Za-z0-9_-]{43}$/);
    await page.getByText('This key is shown only once').waitFor();
    await page.getByRole('button', { name: 'Copy key' }).click();
    await page.getByRole('status').filter({ hasText: 'Copied.' }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key);

    // The list: name, prefix (the key's first characters), scopes, created by me, never used yet.
    const row = page.getByRole('row').filter({ hasText: 'billing-service' });
    await row.waitFor();
    const prefix = (await row.locator('td[data-label="Prefix"] code').textContent())?.replace('…', '') ?? '';
    expect(prefix.length).toBeGreaterThan(3);
    expect(key.startsWith(prefix)).toBe(true);
    expect(await row.locator('td[data-label="Scopes"]').textContent()).toBe('notifications:send');
    expect(await row.locator('td[data-label="Created by"]').textContent()).toBe('you');
    expect(await row.locator('td[data-label="Last used"]').textContent()).toBe('Never');
    await screenshot(page, 'admin-api-keys-1280');
    expect(await overflowing(page)).toEqual([]);

    const sent = await sendWithKey(key, recipient.email);
    expect(sent.status, await sent.clone().text()).toBe(200);
    expect(((await sent.json()) as { createdCount: number }).createdCount).toBe(1);

    // The same page on a phone, then revoke: asked twice, and the key fails at once on the other instance.
    await page.setViewportSize(PHONE);
    await page.getByRole('button', { name: 'Done' }).click();
    await page.getByRole('textbox', { name: 'New API key' }).waitFor({ state: 'detached' });
    expect(await overflowing(page)).toEqual([]);
    await page.getByRole('button', { name: 'Revoke billing-service', exact: true }).click();
    await screenshot(page, 'admin-api-keys-375');
    await page.getByRole('button', { name: 'Confirm revoking billing-service' }).click();
    await page.getByText('Key “billing-service” revoked').waitFor();
    await row.waitFor({ state: 'detached' });
    const refused = await sendWithKey(key, recipient.email);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { code: string }).code).toBe('UNAUTHORIZED');

    await context.close();
    expect(watch.errors, watch.failed.join('\n')).toEqual([]);
  });

  it('an admin adds a webhook, sends a test event, sees the delivery and redelivers it (phone size)', async () => {
    const context = await newContext({ viewport: PHONE });
    await signInContext(context, url(0), admin);
    const page = await context.newPage();
    await page.goto(`${url(0)}/admin/webhooks`);
    await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor();

    const hookUrl = receiver.url('/herald');
    await page.getByLabel('URL', { exact: true }).fill(hookUrl);
    expect(await page.getByRole('checkbox', { name: 'notification.created' }).isChecked()).toBe(true);
    await page.getByRole('checkbox', { name: 'user.created' }).check();
    await page.getByLabel('Description (optional)').fill('e2e receiver');
    await page.getByRole('button', { name: 'Add webhook' }).click();
    const secretField = page.getByRole('textbox', { name: 'Signing secret' });
    await secretField.waitFor();
    const secret = await secretField.inputValue();
    expect(secret).toMatch(/^whsec_/);
    await page.getByText('This secret is shown only once').waitFor();
    expect(await overflowing(page)).toEqual([]);
    await screenshot(page, 'admin-webhooks-created-375');
    await page.getByRole('button', { name: 'Done' }).click();

    const item = page.getByRole('article', { name: hookUrl });
    await item.getByText('Enabled', { exact: true }).waitFor();
    await item.getByRole('button', { name: `Send a test event to ${hookUrl}` }).click();
    await item.getByText(/^Test event .* queued\.$/).waitFor();
    await receiver.until((all) => all.some((r) => r.body.includes('"webhook.test"')));
    const first = receiver.received.find((r) => r.body.includes('"webhook.test"'));
    if (!first) throw new Error('no test event received');
    expect(verifySignature(secret, first)).toBe(true);

    // The deliveries list (opened by the test) shows it delivered with the receiver's 200, on its first attempt.
    const delivery = item.getByTestId('delivery').filter({ hasText: first.id });
    await delivery.filter({ hasText: 'delivered' }).waitFor({ timeout: 30_000 });
    expect(await delivery.locator('td[data-label="Event type"]').textContent()).toBe('webhook.test');
    expect(await delivery.locator('td[data-label="Status code"]').textContent()).toBe('200');
    expect(await delivery.locator('td[data-label="Attempt"]').textContent()).toBe('1');
    await delivery.scrollIntoViewIfNeeded();
    await screenshot(page, 'admin-webhooks-deliveries-375');
    expect(await overflowing(page)).toEqual([]);

    // Redeliver: the same event (same webhook-id) arrives again.
    await delivery.getByRole('button', { name: `Redeliver ${first.id}` }).click();
    await item.getByText(`Event ${first.id} queued again.`).waitFor();
    await receiver.until((all) => all.filter((r) => r.id === first.id).length >= 2);

    // Rotate: a new secret, shown once; deliveries are signed with it (and the old one, for 24 h).
    await item.getByRole('button', { name: `Rotate the secret of ${hookUrl}` }).click();
    const rotatedField = item.getByRole('textbox', { name: 'Signing secret' });
    await rotatedField.waitFor();
    const rotated = await rotatedField.inputValue();
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(secret);
    const before = receiver.received.length;
    await item.getByRole('button', { name: `Send a test event to ${hookUrl}` }).click();
    await receiver.until((all) => all.length > before);
    const signed = receiver.received.at(-1);
    if (!signed) throw new Error('no delivery after the rotation');
    expect(verifySignature(rotated, signed)).toBe(true);
    await item.getByRole('button', { name: 'Done' }).click();

    // Disable and enable again.
    await item.getByRole('button', { name: `Disable ${hookUrl}` }).click();
    await item.getByText('Disabled', { exact: true }).waitFor();
    await item.getByRole('button', { name: `Enable ${hookUrl}` }).click();
    await item.getByText('Enabled', { exact: true }).waitFor();

    await page.setViewportSize(DESKTOP);
    await screenshot(page, 'admin-webhooks-1280');
    expect(await overflowing(page)).toEqual([]);
    await context.close();
    expect(watch.errors, watch.failed.join('\n')).toEqual([]);
  });

  it('keeps the admin pages for admins', async () => {
    const user = await verifiedUser(cluster, 0, 'Uma User');
    const context = await newContext();
    await signInContext(context, url(0), user);
    const page = await context.newPage();
    for (const path of ['/admin/api-keys', '/admin/webhooks']) {
      await page.goto(`${url(0)}${path}`);
      await page.getByRole('heading', { name: 'Administrators only' }).waitFor();
    }
    expect(await page.getByRole('link', { name: 'API keys' }).count()).toBe(0);
    await context.close();
    expect(watch.errors, watch.failed.join('\n')).toEqual([]);
  });

  it('a German user sees the app in German; the contract’s accessible names stay as they are', async () => {
    const user = await verifiedUser(cluster, 0, 'Dora Deutsch');
    const cookie = await apiCookie(url(0), user);
    const update = await fetch(`${url(0)}/auth/update-user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie },
      body: JSON.stringify({ locale: 'de' }),
    });
    expect(update.status, await update.clone().text()).toBe(200);
    await adminSend(url(0), await apiCookie(url(0), admin), user.email, 'Hallo Dora');

    for (const viewport of [DESKTOP, PHONE]) {
      // The browser says English: the user's own locale wins.
      const context = await newContext({ viewport, locale: 'en-US' });
      await signInContext(context, url(0), user);
      const page = await context.newPage();
      await page.goto(`${url(0)}/notifications`);
      await page.getByRole('heading', { name: 'Benachrichtigungen', level: 1 }).waitFor();
      expect(await page.evaluate(() => document.documentElement.lang)).toBe('de');
      expect(await page.title()).toBe('Benachrichtigungen · Herald');
      // The bell keeps the contract's name (CONTRACT §10) in German; what it shows on hover is German.
      const bell = page.getByRole('button', { name: 'Notifications, 1 unread', exact: true });
      await bell.waitFor();
      expect(await bell.getAttribute('title')).toBe('Benachrichtigungen, 1 ungelesen');
      await page.getByRole('button', { name: 'Sign out', exact: true }).waitFor();
      // The SDK's inbox in German: filters, actions, the notification's controls, its date in German.
      const inbox = page.getByRole('main');
      for (const filter of ['Alle', 'Ungelesen', 'Gelesen'])
        await inbox.getByRole('button', { name: filter, exact: true }).waitFor();
      await inbox.getByLabel('Nach Art filtern').waitFor();
      await inbox.getByRole('button', { name: 'Alle als gelesen markieren', exact: true }).waitFor();
      await inbox.getByText('1 ungelesene Benachrichtigung', { exact: true }).waitFor();
      const item = inbox.getByTestId('notification-item').filter({ hasText: 'Hallo Dora' });
      await item.getByRole('button', { name: 'Als gelesen markieren: Hallo Dora', exact: true }).waitFor();
      await item.getByText('Ankündigung', { exact: true }).waitFor();
      // Today: a 24-hour time, as `de` writes it (the browser's en-US would say AM/PM).
      expect(await item.locator('time').textContent()).toMatch(/^\d{2}:\d{2}$/);
      if (viewport === PHONE) await page.getByRole('button', { name: 'Menü' }).click();
      await page
        .getByRole('navigation', { name: 'Hauptnavigation' })
        .getByRole('link', { name: 'Posteingang' })
        .waitFor();
      expect(await overflowing(page)).toEqual([]);
      await screenshot(page, `notifications-de-${viewport.width}`);
      await context.close();
    }

    // The bell's panel, the chat and the room list in German; `Message` and `Send` as the contract names them.
    {
      const context = await newContext({ locale: 'en-US' });
      await signInContext(context, url(0), user);
      const page = await context.newPage();
      await page.goto(`${url(0)}/chat`);
      await page.getByRole('heading', { name: 'Räume', level: 2 }).waitFor();
      await page.getByRole('button', { name: 'Neuer Raum', exact: true }).waitFor();
      await page.getByRole('button', { name: 'Öffentliche Räume', exact: true }).waitFor();
      await page.getByRole('log', { name: 'Nachrichten' }).waitFor();
      const input = page.getByLabel('Message', { exact: true });
      await input.waitFor();
      expect(await input.getAttribute('placeholder')).toBe('Nachricht schreiben');
      await page.getByText(/^\d+ (Mitglied|Mitglieder) und \d+ (Gast|Gäste) online$/).waitFor();
      await input.fill('Guten Tag');
      await page.getByRole('button', { name: 'Send', exact: true }).click();
      const mine = page.getByTestId('chat-message').filter({ hasText: 'Guten Tag' });
      await mine.getByRole('button', { name: 'Bearbeiten', exact: true }).waitFor();
      await mine.getByRole('button', { name: 'Löschen', exact: true }).waitFor();
      expect(await mine.locator('time').textContent()).toMatch(/^\d{2}:\d{2}$/);
      await page.getByRole('button', { name: 'Notifications, 1 unread', exact: true }).click();
      const panel = page.getByRole('dialog', { name: 'Benachrichtigungen' });
      await panel.getByRole('button', { name: 'Als gelesen markieren: Hallo Dora', exact: true }).waitFor();
      await screenshot(page, 'chat-de-1280');
      await context.close();
    }

    // Choosing English in the preferences switches the whole app at once (the session is read again).
    const context = await newContext({ locale: 'en-US' });
    await signInContext(context, url(0), user);
    const prefs = await context.newPage();
    await prefs.goto(`${url(0)}/preferences`);
    await prefs.getByRole('heading', { name: 'Einstellungen', level: 1 }).waitFor();
    await prefs.getByLabel('Sprache').selectOption('en');
    await prefs.getByRole('button', { name: 'Einstellungen speichern' }).click();
    await prefs.getByText('Preferences saved.').waitFor();
    await prefs.getByRole('heading', { name: 'Preferences', level: 1 }).waitFor();
    expect(await prefs.evaluate(() => document.documentElement.lang)).toBe('en');
    await context.close();

    // A visitor whose browser speaks German gets the sign-in page in German, with the fixed names.
    const visitor = await newContext({ locale: 'de-DE' });
    const page = await visitor.newPage();
    await page.goto(`${url(1)}/sign-in`);
    await page.getByRole('heading', { name: 'Anmelden', level: 1 }).waitFor();
    expect(await page.evaluate(() => document.documentElement.lang)).toBe('de');
    await page.getByLabel('Email', { exact: true }).waitFor();
    await page.getByLabel('Password', { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Sign in', exact: true }).waitFor();
    await page.getByRole('link', { name: 'Passwort vergessen?' }).waitFor();
    await visitor.close();
    expect(watch.errors, watch.failed.join('\n')).toEqual([]);
  });
});
