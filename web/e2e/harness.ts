// Browser tests against real Herald processes: the multi-instance harness of the server tests (each process
// serves the built app from web/dist, and FE_BASE_URL defaults to the process's own URL, so email links open
// the app on that instance), SMTP captured in-process, and one headless Chromium driven by playwright-core.
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CapturedMail } from '@herald/server/testkit';
import {
  CLUSTER_ORIGIN,
  type ClusterOptions,
  createVerifiedUserOn,
  startCluster,
  type TestCluster,
} from '@herald/server/testkit';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-quic',
  '--no-first-run',
  '--disable-component-update',
  '--disable-sync',
];
export const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
export const ADMIN_EMAIL = 'admin@herald-e2e.test';
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 375, height: 740 };

export function launchBrowser(): Promise<Browser> {
  mkdirSync(ARTIFACTS, { recursive: true });
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, headless: true });
}

export function startWebCluster(options: ClusterOptions = {}): Promise<TestCluster> {
  return startCluster({
    instances: 2,
    ...options,
    env: {
      // Unset (empty is unset): the service's own URL, as in the default deployment.
      FE_BASE_URL: '',
      ADMIN_EMAILS: ADMIN_EMAIL,
      CHAT_THROTTLE_LIMIT: '100',
      SSE_OPEN_RATE_LIMIT: '1000',
      ...options.env,
    },
  });
}

/** Console errors and uncaught page errors of every page of a context, for a "no errors" assertion. */
export class ConsoleWatch {
  readonly errors: string[] = [];
  /** Responses with an error status, to explain "Failed to load resource" console errors. */
  readonly failed: string[] = [];
  /** Messages expected in a scenario (e.g. failed requests while the network is off). */
  allowed: RegExp[] = [];

  attach(context: BrowserContext): void {
    const watch = (page: Page) => {
      page.on('console', (msg) => {
        if (msg.type() !== 'error') return;
        const text = `${page.url()}: ${msg.text()}`;
        if (!this.allowed.some((re) => re.test(msg.text()))) this.errors.push(text);
      });
      page.on('pageerror', (err) => this.errors.push(`${page.url()}: uncaught ${err.message}`));
      page.on('response', (res) => {
        if (res.status() >= 400) this.failed.push(`${res.status()} ${res.request().method()} ${res.url()}`);
      });
    };
    for (const page of context.pages()) watch(page);
    context.on('page', watch);
  }
}

/** Starts a test's own record (one test's errors do not fail the next). */
export function resetWatch(watch: ConsoleWatch): void {
  watch.errors.length = 0;
  watch.failed.length = 0;
  watch.allowed = [];
}

export interface E2EUser {
  id: string;
  email: string;
  password: string;
  name: string;
}

/** A verified user made through the real endpoints (sign-up, emailed link, verify). */
export async function verifiedUser(
  cluster: TestCluster,
  index: number,
  name: string,
  email?: string,
): Promise<E2EUser> {
  const u = await createVerifiedUserOn(cluster, index, { name, ...(email ? { email } : {}) });
  return { id: u.id, email: u.email, password: u.password, name };
}

/** Signs the browser context in on `baseUrl` through the API (cookies land in the context's jar). */
export async function signInContext(context: BrowserContext, baseUrl: string, user: E2EUser): Promise<void> {
  const res = await context.request.post(`${baseUrl}/auth/sign-in/email`, {
    data: { email: user.email, password: user.password },
    headers: { origin: baseUrl },
  });
  if (res.status() !== 200) throw new Error(`sign-in failed: ${res.status()} ${await res.text()}`);
}

/** Cookie header of a user signed in through the API (for admin calls from the test itself). */
export async function apiCookie(baseUrl: string, user: E2EUser): Promise<string> {
  const res = await fetch(`${baseUrl}/auth/sign-in/email`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN },
    body: JSON.stringify({ email: user.email, password: user.password }),
  });
  if (res.status !== 200) throw new Error(`sign-in failed: ${res.status} ${await res.text()}`);
  return res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0] ?? '')
    .filter((c) => c && !c.endsWith('='))
    .join('; ');
}

export interface SendResult {
  targetCount: number;
  createdCount: number;
  skippedCount: number;
}

/** An admin broadcast through the API (POST /admin/notifications/send). */
export async function adminSend(
  baseUrl: string,
  adminCookie: string,
  identifier: string,
  title: string,
  content = 'Sent by the E2E test',
): Promise<SendResult> {
  const res = await fetch(`${baseUrl}/admin/notifications/send`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie: adminCookie },
    body: JSON.stringify({
      target: { scope: 'user', identifier },
      notification: { type: 'announcement', title, content },
    }),
  });
  if (res.status !== 200) throw new Error(`send failed: ${res.status} ${await res.text()}`);
  return (await res.json()) as SendResult;
}

/** The full link of `page` (verify-email, reset-password, magic-link) in a captured email. */
export function linkFrom(mail: CapturedMail, page: string): string {
  const match = mail.text.match(new RegExp(`https?://[^\\s"<>]+/${page}\\?token=[^\\s"<>]+`));
  if (!match) throw new Error(`no ${page} link in mail "${mail.subject}"`);
  return match[0];
}

/** The bell's accessible name ("Notifications, N unread"), or null when it is not shown. */
export async function bellLabel(page: Page): Promise<string | null> {
  const bell = page.getByRole('button', { name: /^Notifications/ });
  if ((await bell.count()) === 0) return null;
  return bell.getAttribute('aria-label');
}

export async function waitForBell(page: Page, unread: number, timeout = 20_000): Promise<void> {
  await page
    .getByRole('button', { name: `Notifications, ${unread} unread`, exact: true })
    .waitFor({ state: 'visible', timeout });
}

export async function screenshot(page: Page, name: string): Promise<string> {
  const path = `${ARTIFACTS}${name}.png`;
  await page.screenshot({ path, fullPage: false });
  return path;
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}
