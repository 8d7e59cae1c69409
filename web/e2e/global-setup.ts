// Before the browser tests: the served app must be built from the current sources, and Chromium must exist.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CHROMIUM_PATH } from './harness';

export default function setup(): void {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium not found at ${CHROMIUM_PATH}: install it (apt-get install -y chromium) or set CHROMIUM_PATH`,
    );
  }
  const script = fileURLToPath(new URL('../../scripts/build-web.mjs', import.meta.url));
  const result = spawnSync(process.execPath, [script, '--strict'], { stdio: 'inherit' });
  if (result.status !== 0) throw new Error('the web app build failed');
}
