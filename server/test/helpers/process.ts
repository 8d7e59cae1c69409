// One server process (`node --import tsx src/server.ts`, cwd server/) with its output collected line by line, for
// tests of what happens at process level: start-up waits and failures, tracing, signals.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { trackChild } from './redis-server.js';

const SERVER_DIR = fileURLToPath(new URL('../..', import.meta.url));

export interface ServerProcess {
  child: ChildProcess;
  stdout: string[];
  stderr: string[];
  /** Resolves with the first output line (stdout or stderr) matching `pattern`; rejects if the process exits first. */
  waitForLine(pattern: RegExp): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function spawnServer(env: Record<string, string>): ServerProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd: SERVER_DIR,
    // Only what the test gives (plus PATH/HOME), so the machine's own variables cannot change the outcome.
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackChild(child);
  const stdout: string[] = [];
  const stderr: string[] = [];
  const waiters: Array<{ pattern: RegExp; resolve: (line: string) => void }> = [];
  const collect = (into: string[]) => {
    let rest = '';
    return (chunk: Buffer) => {
      const text = rest + chunk.toString();
      const lines = text.split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) {
        into.push(line);
        for (const w of [...waiters]) {
          if (w.pattern.test(line)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(line);
          }
        }
      }
    };
  };
  child.stdout?.on('data', collect(stdout));
  child.stderr?.on('data', collect(stderr));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    stdout,
    stderr,
    exited,
    waitForLine(pattern) {
      const seen = [...stdout, ...stderr].find((l) => pattern.test(l));
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        waiters.push({ pattern, resolve });
        void exited.then(({ code, signal }) =>
          reject(
            new Error(
              `server exited (${code ?? signal}) before a line matched ${pattern}:\n${[...stdout, ...stderr].join('\n')}`,
            ),
          ),
        );
      });
    },
  };
}
