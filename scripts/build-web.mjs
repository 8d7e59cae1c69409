#!/usr/bin/env node
// Builds the web app (web/dist) when it is missing or older than its sources, so `npm install` and `npm start`
// give a served app on a fresh clone without a separate step, and a start with a fresh build costs only a few
// file stats. `--force` always builds. A runtime image (sources absent, web/dist copied in from the build stage)
// and a production install (`npm ci --omit=dev`: no Vite) skip quietly: the first has its build, the second cannot
// make one; without web/dist the service starts without the app (the API works; `/` explains how to build).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const web = path.join(root, 'web');
const builtIndex = path.join(web, 'dist', 'index.html');
// Everything the bundle is made from: the app, the SDK it imports, and their build settings.
const SOURCES = [
  'web/src',
  'web/public',
  'web/index.html',
  'web/vite.config.ts',
  'web/package.json',
  'client/src',
  'client/package.json',
  'server/src/contract.ts',
];

function newestMtime(entry) {
  if (!existsSync(entry)) return 0;
  const stat = statSync(entry);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const child of readdirSync(entry)) newest = Math.max(newest, newestMtime(path.join(entry, child)));
  return newest;
}

const force = process.argv.includes('--force');
const strict = process.argv.includes('--strict');
if (!existsSync(web)) process.exit(0);
const hasBuild = existsSync(builtIndex);
// A runtime image holds web/dist but not the sources: nothing to rebuild from.
if (!existsSync(path.join(web, 'src')) && !force) process.exit(0);
if (!force && hasBuild) {
  const built = statSync(builtIndex).mtimeMs;
  const sources = Math.max(...SOURCES.map((s) => newestMtime(path.join(root, s))));
  if (built >= sources) process.exit(0);
}

// Both are devDependencies: absent from a production install, where the build must not be attempted (it would
// fail with a stack trace about the missing plugin).
// Looked up as installed folders (the workspace's, then the root's): `require.resolve` cannot be used, since
// @vitejs/plugin-react exports neither a CommonJS entry nor its package.json.
const missing = ['vite', '@vitejs/plugin-react'].filter(
  (name) => ![web, root].some((dir) => existsSync(path.join(dir, 'node_modules', name, 'package.json'))),
);
if (missing.length > 0) {
  if (strict) {
    console.error(
      `[herald] cannot build the web app: ${missing.join(' and ')} not installed (run npm install).`,
    );
    process.exit(1);
  }
  // With a build present (copied in, or older than the sources) there is nothing to say: it is served as is.
  if (!hasBuild) {
    console.log(
      '[herald] web app not built (production install: no Vite). The API works without it; build it with ' +
        '`npm run build` where dev dependencies are installed and copy web/dist.',
    );
  }
  process.exit(0);
}

console.log(
  `[herald] building the web app (${existsSync(builtIndex) ? 'sources changed' : 'no build yet'})…`,
);
const result = spawnSync(
  process.execPath,
  [path.join(root, 'node_modules', 'vite', 'bin', 'vite.js'), 'build'],
  {
    cwd: web,
    stdio: 'inherit',
    // Vite keeps an inherited NODE_ENV (vitest sets "test"), which would bundle React's development build.
    env: { ...process.env, NODE_ENV: 'production' },
  },
);
if (result.status !== 0) {
  console.error('[herald] the web app build failed; the service still serves the API.');
  // A failed build must not stop `npm install`/`npm start`; `npm run build:web` reports it as a failure.
  process.exit(strict ? 1 : 0);
}
