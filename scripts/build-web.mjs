#!/usr/bin/env node
// Builds the web app (web/dist) when it is missing or older than its sources, so `npm install` and `npm start`
// give a served app on a fresh clone without a separate step, and a start with a fresh build costs only a few
// file stats. `--force` always builds. Without Vite (a production install with --omit=dev) it says so and
// leaves the service to start without the app (the API works; `/` explains how to build).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
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
if (!existsSync(web)) process.exit(0);
if (!force && existsSync(builtIndex)) {
  const built = statSync(builtIndex).mtimeMs;
  const sources = Math.max(...SOURCES.map((s) => newestMtime(path.join(root, s))));
  if (built >= sources) process.exit(0);
}

let hasVite = true;
try {
  createRequire(path.join(web, 'package.json')).resolve('vite/package.json');
} catch {
  hasVite = false;
}
if (!hasVite) {
  console.warn(
    '[herald] web app not built: Vite is not installed (production install?). The API works without it; run ' +
      '`npm install` then `npm run build:web` to serve the app at /.',
  );
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
  process.exit(process.argv.includes('--strict') ? 1 : 0);
}
