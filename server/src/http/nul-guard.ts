// Refuses NUL characters (U+0000) anywhere in a request's JSON body, path or query with 400. PostgreSQL text
// cannot store NUL, so such input could only ever fail deep inside a query (a 500); no legitimate client sends it.
import type { FastifyInstance } from 'fastify';
import { type AppError, validationError } from './errors.js';
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

/** The 400 for a parsed body containing NUL, or null when it is clean. */
export function nulError(parsed: unknown): AppError | null {
  const path = findNul(parsed);
  if (path === null) return null;
  return validationError([
    { path: path ? `body.${path}` : 'body', message: 'must not contain NUL characters' },
  ]);
}

export function installNulGuard(app: FastifyInstance): void {
  // Fastify's own parser (prototype-poisoning protection included), wrapped with the NUL check.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    // Fastify's default JSON parser is synchronous and reports through `done`; its type merely allows a promise.
    void parseJson(request, typeof body === 'string' ? body : body.toString('utf8'), (err, parsed) => {
      if (err) return done(err);
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
