// Owns the one table of the site's paths: which are pages of the web app, which belong to the API and how. The
// service's web-app serving (http/web-app.ts) and the web app's development proxy (web/vite.config.ts, through
// the package export `@herald/server/site-paths`) both derive from it; the web app's page table is typed by it.
// Tests fail when a route or a page is added on one side only (test/http/site-paths.test.ts, web/test/pages.test.ts).
// Dependency-free on purpose: the web app's build tooling imports it without pulling in server code.
// docs/design/web-app.md, "Web app".

export interface SitePath {
  /** Absolute, without a trailing slash. An entry covers the path and everything below it (longest one wins). */
  readonly path: string;
  /** A page of the web app is at exactly this path (an HTML navigation there gets the app). */
  readonly page: boolean;
  /**
   * The API below this entry: `all` — the path and everything below are the API's, even a browser navigation no
   * route answers (a JSON 404); `routes` — API routes live here, and an HTML navigation that none answers (or
   * that reaches the page itself) gets the app; `false` — no API routes.
   */
  readonly api: 'all' | 'routes' | false;
  /** WebSocket upgrades are served here. */
  readonly ws?: boolean;
}

export const SITE_PATHS = [
  { path: '/auth', page: false, api: 'all' },
  { path: '/notification', page: false, api: 'all' },
  { path: '/docs', page: false, api: 'all' },
  { path: '/openapi.json', page: false, api: 'all' },
  { path: '/metrics', page: false, api: 'all' },
  { path: '/health', page: false, api: 'all' },
  { path: '/client-config', page: false, api: 'all' },
  // Observation routes of the test suite (NODE_ENV=test only).
  { path: '/__test', page: false, api: 'all' },
  // The chat page and the socket at the same path (the SDK's JSON calls are below it).
  { path: '/chat', page: true, api: 'routes', ws: true },
  { path: '/admin', page: true, api: false },
  { path: '/admin/notifications', page: false, api: 'routes' },
  // The page lists users through /auth/admin/*; the routes below it act on one user.
  { path: '/admin/users', page: true, api: 'routes' },
  // Pages whose own path is also the API's list (asked for with Accept: application/json).
  { path: '/admin/api-keys', page: true, api: 'routes' },
  { path: '/admin/webhooks', page: true, api: 'routes' },
  { path: '/admin/push', page: false, api: 'routes' },
  { path: '/admin/metrics', page: true, api: false },
  { path: '/sign-in', page: true, api: false },
  { path: '/sign-up', page: true, api: false },
  { path: '/verify-email', page: true, api: false },
  { path: '/forgot-password', page: true, api: false },
  { path: '/reset-password', page: true, api: false },
  { path: '/magic-link', page: true, api: false },
  { path: '/unsubscribe', page: true, api: false },
  { path: '/notifications', page: true, api: false },
  { path: '/preferences', page: true, api: false },
] as const satisfies readonly SitePath[];

/** The web app's page paths (its page table is keyed by exactly these). */
export type PagePath = Extract<(typeof SITE_PATHS)[number], { page: true }>['path'];

export const PAGE_PATHS: ReadonlySet<string> = new Set(SITE_PATHS.filter((p) => p.page).map((p) => p.path));

/** The entry that covers `pathname`: the longest path equal to it or above it; undefined when none does. */
export function sitePathOf(pathname: string): SitePath | undefined {
  let best: SitePath | undefined;
  for (const entry of SITE_PATHS as readonly SitePath[]) {
    if (pathname !== entry.path && !pathname.startsWith(`${entry.path}/`)) continue;
    if (!best || entry.path.length > best.path.length) best = entry;
  }
  return best;
}

/** Paths that are the API's even for a browser navigation: never the app, a JSON 404 when no route answers. */
export function isApiOnlyPath(pathname: string): boolean {
  return sitePathOf(pathname)?.api === 'all';
}
