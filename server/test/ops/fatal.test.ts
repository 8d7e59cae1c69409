// Uncaught exceptions and unhandled rejections: logged once at fatal with their context, then the shutdown
// sequence (bounded) and exit 1 — never swallowed. The handler is exercised on an EventEmitter standing in for
// `process` (a real uncaught exception would end the test runner).
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { installFatalHandlers } from '../../src/ops/fatal.js';
import { isOlder, nodeVersionWarning, REQUIRED_NODE } from '../../src/ops/node-version.js';
import { captureLogger } from '../helpers/logs.js';

function setup(shutdown: () => Promise<void> | undefined, timeoutMs = 2_000) {
  const proc = new EventEmitter();
  const { logger, lines } = captureLogger('info');
  let resolveExit: (code: number) => void = () => {};
  const exitCode = new Promise<number>((resolve) => {
    resolveExit = resolve;
  });
  installFatalHandlers(
    { logger: () => logger, shutdown, timeoutMs, exit: (code) => resolveExit(code) },
    proc as unknown as NodeJS.Process,
  );
  return { proc, lines, exitCode };
}

describe('fatal errors end the process deliberately', () => {
  it('uncaught exception: logged at fatal with message, stack and origin; shutdown runs; exit 1', async () => {
    let shutdowns = 0;
    const { proc, lines, exitCode } = setup(async () => {
      shutdowns++;
    });
    proc.emit('uncaughtException', new Error('boom in a timer'), 'uncaughtException');
    expect(await exitCode).toBe(1);
    expect(shutdowns).toBe(1);
    const fatal = lines.filter((l) => l.level === 60);
    expect(fatal).toHaveLength(1);
    expect(fatal[0]?.msg).toMatch(/^uncaught exception: boom in a timer; ending the process/);
    expect(fatal[0]?.origin).toBe('uncaughtException');
    expect(JSON.stringify(fatal[0]?.err)).toContain('boom in a timer');
    expect((fatal[0]?.err as { stack?: string } | undefined)?.stack).toContain('fatal.test.ts');
  });

  it('unhandled rejection (not an Error): logged with the reason, exit 1', async () => {
    const { proc, lines, exitCode } = setup(() => undefined);
    proc.emit('unhandledRejection', 'a plain string reason', Promise.resolve());
    expect(await exitCode).toBe(1);
    const fatal = lines.filter((l) => l.level === 60);
    expect(fatal[0]?.msg).toMatch(/^unhandled rejection: a plain string reason/);
  });

  it('a shutdown that hangs is cut off at the timeout: still exit 1, logged', async () => {
    const { proc, lines, exitCode } = setup(() => new Promise<void>(() => {}), 100);
    proc.emit('uncaughtException', new Error('hang'), 'uncaughtException');
    expect(await exitCode).toBe(1);
    expect(lines.some((l) => /timed out: forcing exit/.test(String(l.msg)))).toBe(true);
  });

  it('a second error during the shutdown is logged, and does not start a second shutdown', async () => {
    let shutdowns = 0;
    let release: () => void = () => {};
    const { proc, lines, exitCode } = setup(() => {
      shutdowns++;
      return new Promise<void>((resolve) => {
        release = resolve;
      });
    });
    proc.emit('uncaughtException', new Error('first'), 'uncaughtException');
    proc.emit('unhandledRejection', new Error('second'), Promise.resolve());
    release();
    expect(await exitCode).toBe(1);
    expect(shutdowns).toBe(1);
    expect(lines.filter((l) => l.level === 60)).toHaveLength(1);
    expect(lines.some((l) => l.level === 50 && /while ending the process/.test(String(l.msg)))).toBe(true);
  });
});

describe('Node.js version check', () => {
  it('warns once, naming the required version, on a Node older than engines', () => {
    const warning = nodeVersionWarning('20.19.5');
    expect(warning).toContain('Node.js 20.19.5');
    expect(warning).toContain(`>=${REQUIRED_NODE}`);
    expect(nodeVersionWarning('22.11.9')).toBeDefined();
    expect(nodeVersionWarning('22.12.0')).toBeUndefined();
    expect(nodeVersionWarning('24.1.0')).toBeUndefined();
    expect(isOlder('v21.99.99', '22.12.0')).toBe(true);
  });

  it('REQUIRED_NODE is the engines field of package.json', () => {
    for (const file of ['../../../package.json', '../../package.json']) {
      const pkg = JSON.parse(readFileSync(new URL(file, import.meta.url), 'utf8')) as {
        engines: { node: string };
      };
      expect(pkg.engines.node).toBe(`>=${REQUIRED_NODE.replace(/\.0$/, '')}`);
    }
  });
});
