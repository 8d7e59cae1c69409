// Build of the web app (served by the service from web/dist) and the development server, which proxies the API
// paths to a running service (HERALD_API_URL, default http://localhost:3001) so the app is same-origin with it,
// as in production. HTML navigations to paths shared by a page and the API (/chat, /admin/…) get the app.
import react from '@vitejs/plugin-react';
import { defaultClientConditions, defineConfig, type ProxyOptions } from 'vite';

const api = process.env.HERALD_API_URL ?? 'http://localhost:3001';

const toApi = (ws = false): ProxyOptions => ({
  target: api,
  ws,
  bypass: (req) => (req.headers.accept?.includes('text/html') ? '/index.html' : undefined),
});

export default defineConfig({
  plugins: [react()],
  // The SDK workspace is compiled from its TypeScript sources (its "source" export condition): no separate
  // client build before the app's, and its changes are picked up by the dev server at once.
  resolve: { conditions: ['source', ...defaultClientConditions] },
  build: { target: 'es2022', sourcemap: false },
  server: {
    port: Number(process.env.WEB_DEV_PORT ?? 5173),
    strictPort: true,
    proxy: {
      '/auth': toApi(),
      '/notification/': toApi(),
      '/admin/notifications': toApi(),
      '/admin/users/': toApi(),
      '/admin/api-keys': toApi(),
      '/admin/webhooks': toApi(),
      '/chat': toApi(true),
      '/metrics': toApi(),
      '/health': toApi(),
      '/client-config': toApi(),
      '/docs': toApi(),
      '/openapi.json': toApi(),
    },
  },
});
