// Renders every email template with sample data (APP_NAME "Acme") and screenshots it in headless Chromium into
// docs/images/email-*.png — the pictures in docs/email.md. Run: `npx tsx server/scripts/email-previews.ts`
// (needs /usr/bin/chromium or CHROMIUM_PATH; playwright-core comes with the web workspace).
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { createEmailRenderer, sampleData } from '../src/email/renderer.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const out = path.join(root, 'docs/images');
mkdirSync(out, { recursive: true });

const renderer = createEmailRenderer({
  appName: 'Acme',
  accentColor: '#0f766e',
  defaultLocale: 'en',
  feBaseUrl: 'https://app.acme.example',
});
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium' });
try {
  const shots: Array<{ file: string; html: string; dark: boolean }> = [];
  for (const data of sampleData()) {
    shots.push({ file: `email-${data.template}.png`, html: renderer.render(data, 'en').html, dark: false });
  }
  const digest = sampleData().find((d) => d.template === 'digest');
  if (digest) {
    shots.push({ file: 'email-digest-de-dark.png', html: renderer.render(digest, 'de').html, dark: true });
  }
  for (const shot of shots) {
    const page = await browser.newPage({
      viewport: { width: 680, height: 400 },
      colorScheme: shot.dark ? 'dark' : 'light',
    });
    await page.setContent(shot.html, { waitUntil: 'load' });
    await page.screenshot({ path: path.join(out, shot.file), fullPage: true });
    await page.close();
    console.log(`docs/images/${shot.file}`);
  }
} finally {
  await browser.close();
}
