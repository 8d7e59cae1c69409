// Build of the web app (served by the service from web/dist) and the development server, which proxies the API
// paths to a running service (HERALD_API_URL, default http://localhost:3001) so the app is same-origin with it,
// as in production. What to proxy comes from the service's table of paths (@herald/server/site-paths), the same
// one the service serves pages by: the API's own areas always go to the service; where API routes share a folder
// or a path with the app's pages (/chat, /admin/…), HTML navigations get the app.
import { SITE_PATHS, type SitePath } from '@herald/server/site-paths';
import react from '@vitejs/plugin-react';
import { defaultClientConditions, defineConfig, type ProxyOptions } from 'vite';

const api = process.env.HERALD_API_URL ?? 'http://localhost:3001';

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** One proxy entry per API entry of the table, longest path first (Vite takes the first key that matches). */
function apiProxy(): Record<string, ProxyOptions> {
  const entries = (SITE_PATHS as readonly SitePath[])
    .filter((p) => p.api !== false)
    .sort((a, b) => b.path.length - a.path.length);
  return Object.fromEntries(
    entries.map((p) => [
      // A regular expression key (it starts with ^): the path itself, below it, or with a query, never a longer
      // name (`/notification` must not take the `/notifications` page).
      `^${escapeRegExp(p.path)}(?:[/?]|$)`,
      {
        target: api,
        ws: p.ws === true,
        bypass:
          p.api === 'routes'
            ? (req) => (req.headers.accept?.includes('text/html') ? '/index.html' : undefined)
            : undefined,
      } satisfies ProxyOptions,
    ]),
  );
}

export default defineConfig({
  plugins: [react()],
  // The SDK workspace is compiled from its TypeScript sources (its "source" export condition): no separate
  // client build before the app's, and its changes are picked up by the dev server at once.
  resolve: { conditions: ['source', ...defaultClientConditions] },
  build: { target: 'es2022', sourcemap: false },
  server: {
    port: Number(process.env.WEB_DEV_PORT ?? 5173),
    strictPort: true,
    proxy: apiProxy(),
  },
});
