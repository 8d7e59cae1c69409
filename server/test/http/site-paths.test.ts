// The one table of paths (src/http/site-paths.ts) against what the service really registers: every route lies
// under an API entry of the table (a route outside it would be served the web app on an HTML navigation, and not
// proxied by the development server), and every API entry still has a route. The web app's side (its page table
// equals the table's pages) is web/test/pages.test.ts plus the typecheck.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { SITE_PATHS, type SitePath, sitePathOf } from '../../src/http/site-paths.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';

/**
 * The registered routes' paths, rebuilt from Fastify's route tree (`printRoutes()`): each line is a node, indented
 * four characters per level, whose label continues its parent's path; a node with methods is a route.
 */
function routePaths(tree: string): string[] {
  const stack: string[] = [];
  const paths: string[] = [];
  for (const line of tree.split('\n')) {
    const at = line.search(/[├└]── /);
    if (at < 0) continue;
    const depth = at / 4;
    const label = line.slice(at + 4);
    const m = /^(.*?)(?: \(([A-Z, ]+)\))?$/.exec(label);
    const segment = m?.[1] === '(empty root node)' ? '' : (m?.[1] ?? '');
    stack.length = depth;
    stack.push(segment);
    if (m?.[2]) paths.push(stack.join(''));
  }
  return paths;
}

describe('the table of paths matches the registered routes', () => {
  let env: TestEnv;
  let app: App;
  let routes: string[];
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
    // CORS answers preflights for every path: that catch-all is no API area.
    routes = routePaths(app.printRoutes()).filter((p) => p !== '*');
  });
  afterAll(async () => {
    await env.close();
  });

  it('reads the route tree (a change of its format must fail here, not pass silently)', () => {
    expect(routes).toEqual(
      expect.arrayContaining([
        '/notification/list',
        '/notification/:id/read',
        '/auth/*',
        '/chat',
        '/admin/users/:id/messages',
        '/admin/webhooks/:id/deliveries/:deliveryId/redeliver',
        '/health',
      ]),
    );
  });

  it('every route lies under an API entry of the table', () => {
    const outside = routes.filter((route) => {
      const entry = sitePathOf(route);
      return entry === undefined || entry.api === false;
    });
    expect(outside).toEqual([]);
  });

  it('every API entry of the table still has a route', () => {
    const stale = (SITE_PATHS as readonly SitePath[])
      .filter((entry) => entry.api !== false)
      .filter((entry) => !routes.some((route) => sitePathOf(route) === entry))
      .map((entry) => entry.path);
    expect(stale).toEqual([]);
  });

  it('the table is well formed: absolute paths, no trailing slash, each once, nothing inside an API-only area', () => {
    const entries = SITE_PATHS as readonly SitePath[];
    const paths = entries.map((p) => p.path);
    expect(paths.filter((p) => !/^\/[^?#]*[^/]$/.test(p))).toEqual([]);
    expect(new Set(paths).size).toBe(paths.length);
    // An `all` entry is the API's whole: the development proxy forwards everything below it, so an entry inside
    // it (a page, say) would be served differently by the service and by the proxy.
    const inside = entries.filter((p) =>
      entries.some(
        (area) =>
          area.api === 'all' && area !== p && (p.path === area.path || p.path.startsWith(`${area.path}/`)),
      ),
    );
    expect(inside.map((p) => p.path)).toEqual([]);
    expect(entries.filter((p) => p.page && p.api === 'all').map((p) => p.path)).toEqual([]);
  });
});
