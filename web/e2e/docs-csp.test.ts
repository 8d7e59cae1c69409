// Issue 22 (8): the /docs reference UI (swagger-ui) is served with a Content-Security-Policy, and the page still
// renders under it in Chromium: every operation listed, no CSP violation, no console error.

import { startCluster, type TestCluster } from '@herald/server/testkit';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleWatch, launchBrowser } from './harness';

describe('/docs under its Content-Security-Policy', () => {
  let cluster: TestCluster;
  let browser: Browser;
  beforeAll(async () => {
    [cluster, browser] = await Promise.all([
      startCluster({ instances: 1, redis: 'shared' }),
      launchBrowser(),
    ]);
  });
  afterAll(async () => {
    await browser?.close();
    await cluster?.close();
  });

  it('sends a policy that allows only its own scripts', async () => {
    const res = await fetch(`${cluster.url(0)}/docs/static/index.html`);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("object-src 'none'");
    const scriptSrc = csp.split(';').find((d) => d.trim().startsWith('script-src ')) ?? '';
    expect(scriptSrc).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
  });

  it('renders the operations with no violation and no console error', async () => {
    const context = await browser.newContext();
    const watch = new ConsoleWatch();
    watch.attach(context);
    const page = await context.newPage();
    await page.addInitScript(() => {
      const w = window as unknown as { __cspViolations: string[] };
      w.__cspViolations = [];
      document.addEventListener('securitypolicyviolation', (e) => {
        w.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`);
      });
    });
    await page.goto(`${cluster.url(0)}/docs`);
    await page.locator('.opblock').first().waitFor({ timeout: 30_000 });
    expect(await page.locator('.opblock').count()).toBeGreaterThan(10);
    const violations = await page.evaluate(
      () => (window as unknown as { __cspViolations: string[] }).__cspViolations,
    );
    expect(violations).toEqual([]);
    expect(watch.errors).toEqual([]);
    // The policy really applies: an injected inline script does not run.
    const ran = await page.evaluate(() => {
      const s = document.createElement('script');
      s.textContent = 'window.__inlineRan = true';
      document.body.appendChild(s);
      return (window as unknown as { __inlineRan?: boolean }).__inlineRan === true;
    });
    expect(ran).toBe(false);
    await context.close();
  });
});
