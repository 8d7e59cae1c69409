// Owns what happens on an uncaught exception or an unhandled promise rejection: the process state is unknown
// from then on, so it is logged once at fatal with its context (kind, error and stack, origin) and the process
// ends deliberately with exit code 1 — after the shutdown sequence when one is available (health 503, clients told
// to reconnect elsewhere, pools closed), bounded by the shutdown timeout. Never swallowed, never silent.
import type { Logger } from '../infra/logger.js';

export interface FatalHandlerOptions {
  /** The logger of the moment: the pre-app logger at start-up, the app's once it exists. */
  logger: () => Pick<Logger, 'fatal' | 'error'>;
  /** The graceful shutdown (app.close() and tracing flush), or undefined before the app is built. */
  shutdown: () => Promise<void> | undefined;
  timeoutMs: number;
  exit: (code: number) => void;
}

type ProcessLike = Pick<NodeJS.Process, 'on'>;

/** Installs the handlers on `proc` (the real process by default, an EventEmitter in tests). */
export function installFatalHandlers(options: FatalHandlerOptions, proc: ProcessLike = process): void {
  let ending = false;
  const end = (kind: 'uncaught exception' | 'unhandled rejection', err: unknown, origin?: string) => {
    const logger = options.logger();
    if (ending) {
      // A second failure while shutting down (possibly caused by the first): record it, keep ending.
      logger.error({ err, origin }, `${kind} while ending the process after an earlier one`);
      return;
    }
    ending = true;
    logger.fatal(
      { err, origin, kind },
      `${kind}: ${err instanceof Error ? err.message : String(err)}; ending the process (exit 1)`,
    );
    const timer = setTimeout(() => {
      options.logger().error('shutdown after a fatal error timed out: forcing exit');
      options.exit(1);
    }, options.timeoutMs);
    timer.unref?.();
    let shutdown: Promise<void> | undefined;
    try {
      shutdown = options.shutdown();
    } catch (shutdownErr) {
      options.logger().error({ err: shutdownErr }, 'shutdown after a fatal error failed');
    }
    void Promise.resolve(shutdown)
      .catch((shutdownErr: unknown) =>
        options.logger().error({ err: shutdownErr }, 'shutdown after a fatal error failed'),
      )
      .finally(() => {
        clearTimeout(timer);
        options.exit(1);
      });
  };
  proc.on('uncaughtException', (err: Error, origin: string) => end('uncaught exception', err, origin));
  proc.on('unhandledRejection', (reason: unknown) => end('unhandled rejection', reason));
}
