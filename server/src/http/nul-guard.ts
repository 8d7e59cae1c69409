// Refuses NUL characters (U+0000) anywhere in a request's JSON body, path or query with 400. PostgreSQL text
// cannot store NUL, so such input could only ever fail deep inside a query (a 500); no legitimate client sends it.
import type { FastifyInstance } from 'fastify';
import { type AppError, httpError, validationError } from './errors.js';
import { noNul } from './schemas.js';

/** Path (dot-separated) of the first string or key containing NUL, or null. Iterative: no stack overflow. */
export function findNul(value: unknown): string | null {
  const stack: Array<[unknown, string]> = [[value, '']];
  while (stack.length > 0) {
    const [current, path] = stack.pop() as [unknown, string];
    if (typeof current === 'string') {
      if (!noNul(current)) return path;
    } else if (current !== null && typeof current === 'object') {
      for (const [key, child] of Object.entries(current)) {
        const childPath = path ? `${path}.${key}` : key;
        if (!noNul(key)) return childPath;
        stack.push([child, childPath]);
      }
    }
  }
  return null;
}

/**
 * True when parsed JSON nests arrays/objects deeper than `max`. Iterative, so a 64 KiB body of 30,000 `[` costs
 * one pass and no stack: such a body is valid JSON that V8 parses, but anything recursive downstream
 * (JSON.stringify, a validator, a logger) would throw RangeError and answer 500.
 */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number];
    if (current === null || typeof current !== 'object') continue;
    if (depth + 1 > max) return true;
    for (const child of Object.values(current)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return false;
}

/** The 400 for a parsed body containing NUL, or null when it is clean. */
export function nulError(parsed: unknown): AppError | null {
  const path = findNul(parsed);
  if (path === null) return null;
  return validationError([
    { path: path ? `body.${path}` : 'body', message: 'must not contain NUL characters' },
  ]);
}

/** Deeper than any of Herald's own bodies (notification `metadata.data` included) can usefully be. */
export const MAX_BODY_DEPTH = 64;

export function installNulGuard(app: FastifyInstance): void {
  // Fastify's own parser (prototype-poisoning protection included), wrapped with the NUL check.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    // Fastify's default JSON parser is synchronous and reports through `done`; its type merely allows a promise.
    void parseJson(request, typeof body === 'string' ? body : body.toString('utf8'), (err, parsed) => {
      if (err) return done(err);
      // Valid JSON, but serialising or validating it recursively later would overflow the stack (a 500).
      if (nestedDeeperThan(parsed, MAX_BODY_DEPTH)) {
        return done(
          httpError('INVALID_JSON', `Body must be JSON nested at most ${MAX_BODY_DEPTH} levels deep`),
        );
      }
      const nul = nulError(parsed);
      if (nul) return done(nul);
      done(null, parsed);
    });
  });
  app.addHook('onRequest', (request, _reply, done) => {
    // %00 decodes to NUL in params and query values; a raw NUL cannot appear in a valid request line.
    if (/%00/i.test(request.url)) {
      return done(validationError([{ path: 'url', message: 'must not contain NUL characters' }]));
    }
    done();
  });
}
