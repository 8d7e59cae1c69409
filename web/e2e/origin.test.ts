// The development origin trap: a service started with its default address (API_BASE_URL unset, so
// http://localhost:<port>) opened in the browser at http://127.0.0.1:<port> must sign in and chat like at
// localhost; an address the service does not trust must say so, naming CORS_ALLOWLISTED_ORIGINS, instead of
// "Invalid origin" and a chat that reconnects forever.

import type { TestCluster } from '@herald/server/testkit';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHROMIUM_ARGS,
  CHROMIUM_PATH,
  ConsoleWatch,
  DESKTOP,
  type E2EUser,
  startWebCluster,
  verifiedUser,
  waitForBell,
} from './harness';

/** A name Chromium resolves to the loopback address, for an origin the service does not trust. */
const REFUSED_HOST = 'refused-origin.test';

describe('the development origin trap', () => {
  let cluster: TestCluster;
  let browser: Browser;
  let user: E2EUser;
  const watch = new ConsoleWatch();

  beforeAll(async () => {
    [cluster, browser] = await Promise.all([
      // API_BASE_URL empty is unset: the default http://localhost:<port>, as `npm start` has it.
      startWebCluster({ instances: 1, env: { API_BASE_URL: '' } }),
      chromium.launch({
        executablePath: CHROMIUM_PATH,
        args: [...CHROMIUM_ARGS, `--host-resolver-rules=MAP ${REFUSED_HOST} 127.0.0.1`],
        headless: true,
      }),
    ]);
    user = await verifiedUser(cluster, 0, 'Lou Loopback');
  });

  afterAll(async () => {
    await browser?.close();
    await cluster?.close();
  });

  it('the start log says which address to open', async () => {
    const line = await cluster.waitForLog(0, 'Herald ready');
    expect(line).toContain(`open http://localhost:${cluster.port(0)} in a browser`);
  });

  it('opened at 127.0.0.1, the app signs in and chats (the service is localhost by default)', async () => {
    const context = await browser.newContext({ viewport: DESKTOP });
    watch.attach(context);
    const page = await context.newPage();
    const base = `http://127.0.0.1:${cluster.port(0)}`;
    await page.goto(`${base}/sign-in`);
    await page.getByLabel('Email', { exact: true }).fill(user.email);
    await page.getByLabel('Password', { exact: true }).fill(user.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.waitForURL(/\/notifications$/);
    await waitForBell(page, 0);
    expect(await page.getByTestId('origin-banner').count()).toBe(0);

    await page.goto(`${base}/chat`);
    await page.getByLabel('Message', { exact: true }).fill('Hello from 127.0.0.1');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await page.getByTestId('chat-message').filter({ hasText: 'Hello from 127.0.0.1' }).waitFor();
    await context.close();
    expect(watch.errors, watch.failed.join('\n')).toEqual([]);
  });

  it('opened at an address the service does not trust, the app names CORS_ALLOWLISTED_ORIGINS', async () => {
    const context = await browser.newContext({ viewport: DESKTOP });
    const page = await context.newPage();
    const base = `http://${REFUSED_HOST}:${cluster.port(0)}`;
    await page.goto(`${base}/chat`);
    const banner = page.getByTestId('origin-banner');
    await banner.waitFor();
    expect(await banner.textContent()).toContain('CORS_ALLOWLISTED_ORIGINS');
    expect(await banner.textContent()).toContain(base);
    // The chat stops reconnecting and says why.
    await page
      .locator('.herald-chat [role="alert"]')
      .filter({ hasText: 'CORS_ALLOWLISTED_ORIGINS' })
      .waitFor({ timeout: 20_000 });
    await page.getByText('· refused').waitFor();

    await page.goto(`${base}/sign-in`);
    await page.getByLabel('Email', { exact: true }).fill(user.email);
    await page.getByLabel('Password', { exact: true }).fill(user.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.locator('form [role="alert"]').filter({ hasText: 'CORS_ALLOWLISTED_ORIGINS' }).waitFor();
    expect(page.url()).toContain('/sign-in');
    await context.close();
  });
});
