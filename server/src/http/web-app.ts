// Owns serving the bundled web app (web/, built into web/dist) at `/` and the small public configuration it
// reads at start. Files are loaded into memory once at start-up (the build is a few hundred KiB), so a request
// path is only ever looked up in a map and can never reach outside the build folder. Hashed assets are cached
// for a year; index.html is revalidated on every load so a new build is picked up at once. HTML navigations to
// paths no API route answers (and to pages whose path a route shares, such as `/chat`, whose route is the
// WebSocket endpoint) get index.html, and the client-side router renders the page; API paths keep their JSON
// 404s. Which is which comes from site-paths.ts. docs/design/web-app.md, "Web app".
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { BUILT_IN_SOCIAL_PROVIDERS, type Config, normalizeOrigin } from '../config.js';
import type { Logger } from '../infra/logger.js';
import { isApiOnlyPath, PAGE_PATHS } from './site-paths.js';

/** web/dist of this repository, from server/src/http (tsx) or server/dist/http (build output) alike. */
export const DEFAULT_WEB_APP_DIR = fileURLToPath(new URL('../../../web/dist', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.webmanifest': 'application/manifest+json',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};
const COMPRESSIBLE = /^(text\/|image\/svg|application\/(json|manifest))/;
const IMMUTABLE = 'public, max-age=31536000, immutable';

interface StaticFile {
  body: Buffer;
  /** Compressed on first use (not at start-up, which many processes pay and most never serve). */
  gzip: Buffer | null | undefined;
  type: string;
  etag: string;
  cacheControl: string;
}

// One load per build (tests and several apps in one process share it): keyed by folder and index.html's mtime.
const loaded = new Map<string, { stamp: number; files: Map<string, StaticFile> }>();

function loadFilesOnce(root: string): Map<string, StaticFile> {
  const stamp = statSync(path.join(root, 'index.html')).mtimeMs;
  const cached = loaded.get(root);
  if (cached && cached.stamp === stamp) return cached.files;
  const files = loadFiles(root);
  loaded.set(root, { stamp, files });
  return files;
}

function loadFiles(root: string): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(full);
        continue;
      }
      if (!entry.isFile()) continue;
      const urlPath = `/${path.relative(root, full).split(path.sep).join('/')}`;
      const body = readFileSync(full);
      const type = TYPES[path.extname(entry.name).toLowerCase()] ?? 'application/octet-stream';
      files.set(urlPath, {
        body,
        gzip: COMPRESSIBLE.test(type) && body.length > 1024 ? undefined : null,
        type,
        etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
        // Vite puts content-hashed files under /assets; anything else may change under the same name.
        cacheControl: urlPath.startsWith('/assets/') ? IMMUTABLE : 'no-cache',
      });
    }
  };
  walk(root);
  return files;
}

const NOT_BUILT_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Herald — web app not built</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; padding: 0 1rem">
<h1>The web app is not built</h1>
<p>The API is running (see <a href="/docs">/docs</a>), but <code>web/dist</code> is missing.</p>
<p>Build it with <code>npm run build:web</code> (or restart with <code>npm start</code>, which builds it when it is
missing or out of date), then reload this page. Set <code>SERVE_WEB_APP=false</code> to turn serving off.</p>
</body></html>
`;

function acceptsHtml(request: FastifyRequest): boolean {
  const accept = request.headers.accept;
  return typeof accept === 'string' && accept.includes('text/html');
}

/** The content security policy of the app's HTML: only its own scripts, and the API on this origin. */
function contentSecurityPolicy(config: Config): string {
  const api = new URL(config.API_BASE_URL);
  const wsApi = `${api.protocol === 'https:' ? 'wss' : 'ws'}://${api.host}`;
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: https:",
    `connect-src 'self' ${api.origin} ${wsApi}`,
    "object-src 'none'",
    "base-uri 'self'",
    "frame-ancestors 'none'",
    "form-action 'self'",
  ].join('; ');
}

/** What the app needs to know before anyone signs in; public, also when the app is deployed elsewhere. */
export function registerClientConfig(app: FastifyInstance, config: Config): void {
  const trusted = new Set(config.trustedOrigins);
  app.withTypeProvider<ZodTypeProvider>().get(
    '/client-config',
    {
      schema: {
        tags: ['web app'],
        summary: 'Public settings the web app reads at start (which sign-in methods exist)',
        response: {
          200: z.object({
            socialProvider: z
              .object({
                id: z.string().describe('Provider id (SOCIAL_PROVIDER)'),
                signInPath: z
                  .enum(['/auth/sign-in/social', '/auth/sign-in/oauth2'])
                  .describe('better-auth route that starts the sign-in (built-in provider or generic OIDC)'),
              })
              .nullable()
              .describe('The configured social/OIDC sign-in provider, or null when there is none'),
            emailDelivery: z
              .enum(['smtp', 'log', 'disabled'])
              .describe(
                'Where account emails go: sent over SMTP, written to the service log (development without SMTP_HOST), or nowhere',
              ),
            origin: z
              .object({
                value: z
                  .string()
                  .describe("The page's origin (its Origin header, or the address it was served at)"),
                trusted: z
                  .boolean()
                  .describe(
                    'Whether sign-in, requests with the session and chat are accepted from this origin',
                  ),
                setting: z
                  .literal('CORS_ALLOWLISTED_ORIGINS')
                  .describe('The setting that lists allowed origins'),
              })
              .describe(
                "Whether the service accepts the page's origin: an untrusted one can read but not sign in",
              ),
          }),
        },
      },
    },
    async (request, reply) => {
      // The answer depends on the page's origin: caches keep one per origin, and revalidate.
      reply.header('cache-control', 'no-cache').header('vary', 'Origin');
      // A browser sends Origin on cross-origin requests; a same-origin GET has none, and then the page's origin is
      // the address the request came to (Host, or X-Forwarded-Host/Proto behind a trusted proxy).
      const origin = normalizeOrigin(request.headers.origin ?? `${request.protocol}://${request.host}`) ?? '';
      const base = {
        emailDelivery: config.SMTP_HOST
          ? ('smtp' as const)
          : config.isProduction
            ? ('disabled' as const)
            : ('log' as const),
        origin: {
          value: origin,
          trusted: trusted.has(origin),
          setting: 'CORS_ALLOWLISTED_ORIGINS' as const,
        },
      };
      if (!config.SOCIAL_CLIENT_ID || !config.SOCIAL_CLIENT_SECRET) return { ...base, socialProvider: null };
      // The same split as auth.ts: a well-known provider without an issuer is better-auth's built-in one.
      const builtIn = BUILT_IN_SOCIAL_PROVIDERS.has(config.SOCIAL_PROVIDER) && !config.SOCIAL_ISSUER;
      return {
        ...base,
        socialProvider: {
          id: config.SOCIAL_PROVIDER,
          signInPath: builtIn ? ('/auth/sign-in/social' as const) : ('/auth/sign-in/oauth2' as const),
        },
      };
    },
  );
}

/** Static files and page navigations; registered before the routes so its onRequest hook sees every request. */
export function registerWebApp(app: FastifyInstance, config: Config, logger: Logger): void {
  if (!config.SERVE_WEB_APP) return;
  const root = path.resolve(config.WEB_APP_DIR ?? DEFAULT_WEB_APP_DIR);
  const built = existsSync(path.join(root, 'index.html')) && statSync(root).isDirectory();
  const files = built ? loadFilesOnce(root) : new Map<string, StaticFile>();
  const index = files.get('/index.html');
  if (built) logger.info({ dir: root, files: files.size }, 'serving the web app at /');
  else logger.warn({ dir: root }, 'web app not built: run `npm run build:web`; the API works without it');
  const csp = contentSecurityPolicy(config);

  const send = (request: FastifyRequest, reply: FastifyReply, file: StaticFile, html: boolean) => {
    reply.header('content-type', file.type);
    reply.header('cache-control', html ? 'no-cache' : file.cacheControl);
    reply.header('etag', file.etag);
    reply.header('vary', 'accept-encoding');
    if (html) reply.header('content-security-policy', csp);
    const given = request.headers['if-none-match'];
    if (typeof given === 'string' && given.split(',').some((t) => t.trim() === file.etag)) {
      return reply.code(304).send();
    }
    const gzipOk = /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''));
    if (gzipOk && file.gzip === undefined) {
      const packed = gzipSync(file.body, { level: 9 });
      file.gzip = packed.length < file.body.length ? packed : null;
    }
    const body = gzipOk && file.gzip ? file.gzip : file.body;
    if (body === file.gzip) reply.header('content-encoding', 'gzip');
    reply.header('content-length', body.length);
    return reply.code(200).send(request.method === 'HEAD' ? undefined : body);
  };

  // A callback hook: the API's requests (every one but static files and page loads) pass with no promise and no
  // microtask. A hook that answers sends the reply and does not call done (Fastify's rule for callback hooks).
  app.addHook('onRequest', (request, reply, done) => {
    if (request.method !== 'GET' && request.method !== 'HEAD') return done();
    const q = request.url.indexOf('?');
    const pathname = q < 0 ? request.url : request.url.slice(0, q);
    const file = files.get(pathname);
    // index.html by its own name is a navigation like any other (no-cache, with the CSP).
    if (file && pathname !== '/index.html') {
      send(request, reply, file, false);
      return;
    }
    // Which paths are the API's and which the app's pages: the one table in site-paths.ts.
    if (!acceptsHtml(request) || isApiOnlyPath(pathname) || request.headers.upgrade) return done();
    // A path some API route answers stays the API's, except a page's own path (the API's calls there ask for
    // JSON, never for text/html).
    const matched = request.routeOptions.url !== undefined;
    if (matched && !PAGE_PATHS.has(pathname)) return done();
    if (!index) {
      reply
        .code(503)
        .header('content-type', 'text/html; charset=utf-8')
        .header('cache-control', 'no-store')
        .send(NOT_BUILT_PAGE);
      return;
    }
    send(request, reply, index, true);
  });
}
