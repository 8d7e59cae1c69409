// Owns the logger options: JSON in production, pretty in development (when pino-pretty is installed),
// silent-able in tests.
import { createRequire } from 'node:module';
import type { LoggerOptions } from 'pino';

/** One log method: an object (bindings or an error) with an optional message, or a message alone. */
export interface LogFn {
  (obj: unknown, msg?: string, ...args: unknown[]): void;
  (msg: string, ...args: unknown[]): void;
}

/**
 * The logging surface the code uses. A pino logger (and Fastify's `app.log`) satisfies it as is; tests and the
 * CLI can pass a small object of their own.
 */
export interface Logger {
  level: string;
  fatal: LogFn;
  error: LogFn;
  warn: LogFn;
  info: LogFn;
  debug: LogFn;
  trace: LogFn;
  child(bindings: Record<string, unknown>): Logger;
}

/**
 * The URL as logged: no query string (verification and magic-link tokens travel there), and the token segment
 * of `/auth/reset-password/<token>` (better-auth's link target) replaced, so access logs never hold a working link.
 */
export function loggableUrl(url: string): string {
  const path = url.split('?', 1)[0] ?? '';
  return path.replace(/^(\/auth\/reset-password\/)[^/]+/, '$1[redacted]');
}

interface SerializableRequest {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

const requireFromHere = createRequire(import.meta.url);

/**
 * pino-pretty is a dev dependency: an install without dev dependencies (`npm ci --omit=dev`) started on a terminal
 * would otherwise crash at start-up when pino cannot load the transport. The resolver is injectable for tests.
 */
export function canPrettyPrint(resolve: (id: string) => string = requireFromHere.resolve): boolean {
  try {
    resolve('pino-pretty');
    return true;
  } catch {
    return false;
  }
}

export function loggerOptions(
  level: string,
  pretty: boolean,
  resolve?: (id: string) => string,
): LoggerOptions {
  return {
    level,
    serializers: {
      // Fastify's default request fields, with the URL made safe to keep.
      req: (req: SerializableRequest) => ({
        method: req.method,
        url: loggableUrl(req.url ?? ''),
        host: req.host,
        remoteAddress: req.ip,
        remotePort: req.socket?.remotePort,
      }),
    },
    redact: {
      paths: ['req.headers.cookie', 'req.headers.authorization', 'res.headers["set-cookie"]'],
      censor: '[redacted]',
    },
    ...(pretty && canPrettyPrint(resolve)
      ? {
          transport: {
            target: 'pino-pretty',
            options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' },
          },
        }
      : {}),
  };
}
