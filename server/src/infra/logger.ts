// Owns the logger options: JSON in production, pretty in development, silent-able in tests.
import type { FastifyBaseLogger } from 'fastify';
import type { LoggerOptions } from 'pino';

export type Logger = FastifyBaseLogger;

export function loggerOptions(level: string, pretty: boolean): LoggerOptions {
  return {
    level,
    redact: {
      paths: ['req.headers.cookie', 'req.headers.authorization', 'res.headers["set-cookie"]'],
      censor: '[redacted]',
    },
    ...(pretty
      ? {
          transport: {
            target: 'pino-pretty',
            options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' },
          },
        }
      : {}),
  };
}
