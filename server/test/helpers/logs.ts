// A real pino logger whose JSON lines land in an array, for tests that assert on what was logged.
import { Writable } from 'node:stream';
import pino from 'pino';

export function captureLogger(level = 'info') {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level }, stream), lines };
}
