// Owns the logger options: JSON in production, pretty in development (when pino-pretty is installed),
// silent-able in tests.
import { createRequire } from 'node:module';
import type { FastifyBaseLogger } from 'fastify';
import type { LoggerOptions } from 'pino';

export type Logger = FastifyBaseLogger;

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
