#!/usr/bin/env node
// `npm run dev`: the API (tsx watch, not serving the bundled app) and the Vite dev server proxying to it, both
// in this terminal; Ctrl-C stops both. Open http://localhost:5173.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const apiPort = process.env.PORT ?? '3001';
const webPort = process.env.WEB_DEV_PORT ?? '5173';
const webUrl = `http://localhost:${webPort}`;

const children = [
  spawn('npm', ['run', 'dev', '-w', 'server'], {
    cwd: root,
    stdio: 'inherit',
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
    env: { ...process.env, HERALD_API_URL: `http://localhost:${apiPort}`, WEB_DEV_PORT: webPort },
  }),
];

let exiting = false;
const stop = (code) => {
  if (exiting) return;
  exiting = true;
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  process.exitCode = code;
};
for (const child of children) child.on('exit', (code) => stop(code ?? 0));
process.on('SIGINT', () => stop(0));
process.on('SIGTERM', () => stop(0));
console.log(`[herald] API on http://localhost:${apiPort}, web app on ${webUrl}`);
