#!/usr/bin/env node
// `npm run dev`: the API (tsx watch, not serving the bundled app) and the Vite dev server proxying to it, both
// in this terminal; Ctrl-C (SIGINT) or SIGTERM stops both with everything they started. Open http://localhost:5173.
// Each child runs in its own process group (`npm run` → sh → tsx watch → node, npm → vite): signalling only the
// npm processes would leave the API, tsx watch and Vite holding their ports and the embedded database's lock, so
// the whole group is signalled, and killed if it has not exited within STOP_GRACE_MS.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const apiPort = process.env.PORT ?? '3001';
const webPort = process.env.WEB_DEV_PORT ?? '5173';
const webUrl = `http://localhost:${webPort}`;

const STOP_GRACE_MS = 10_000;

const children = [
  spawn('npm', ['run', 'dev', '-w', 'server'], {
    cwd: root,
    stdio: 'inherit',
    detached: true,
    env: {
      ...process.env,
      PORT: apiPort,
      SERVE_WEB_APP: process.env.SERVE_WEB_APP ?? 'false',
      // Email links and the trusted origin are the dev server's, where the pages are.
      FE_BASE_URL: process.env.FE_BASE_URL ?? webUrl,
    },
  }),
  spawn('npm', ['run', 'dev', '-w', 'web'], {
    cwd: root,
    stdio: 'inherit',
    detached: true,
    env: { ...process.env, HERALD_API_URL: `http://localhost:${apiPort}`, WEB_DEV_PORT: webPort },
  }),
];

/** Signals a child's whole process group; false when the group is already gone. */
function signalGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
    return true;
  } catch {
    return false;
  }
}

const groupAlive = (child) => signalGroup(child, 0);

let exiting = false;
const stop = (code, signal = 'SIGTERM') => {
  if (exiting) return;
  exiting = true;
  process.exitCode = code;
  for (const child of children) signalGroup(child, signal);
  // Exit once every group is gone (tsx watch and Vite take a moment to close); past the grace, kill what is left.
  const started = Date.now();
  const wait = setInterval(() => {
    const alive = children.filter(groupAlive);
    if (alive.length === 0) {
      clearInterval(wait);
      process.exit(process.exitCode ?? 0);
    }
    if (Date.now() - started > STOP_GRACE_MS) {
      for (const child of alive) signalGroup(child, 'SIGKILL');
    }
  }, 100);
};
for (const child of children) child.on('exit', (code) => stop(code ?? 0));
process.on('SIGINT', () => stop(0, 'SIGINT'));
process.on('SIGTERM', () => stop(0, 'SIGTERM'));
// Last resort (an exception in this script): never leave the groups running.
process.on('exit', () => {
  for (const child of children) signalGroup(child, 'SIGKILL');
});
console.log(`[herald] API on http://localhost:${apiPort}, web app on ${webUrl}`);
