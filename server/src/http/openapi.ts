// Finishes the served OpenAPI 3.1 document: merges better-auth's /auth paths after Herald's own routes, defines
// the security schemes every operation names (session cookie, metrics bearer key, API keys), gives every response a
// meaningful description and orders the tags. Applied once per document build (@fastify/swagger caches it).

export type PathItem = Record<string, { tags?: string[] } & Record<string, unknown>>;

/** The /auth part of the document, as auth/openapi.ts describes better-auth's routes. */
export interface AuthOpenApi {
  paths: Record<string, PathItem>;
  schemas: Record<string, unknown>;
}

export const AUTH_TAG = 'accounts (better-auth)';

type Operation = PathItem[string];
type Responses = Record<string, { description?: string } & Record<string, unknown>>;

export interface OpenApiDocument {
  openapi: string;
  paths?: Record<string, PathItem>;
  components?: { schemas?: Record<string, unknown>; securitySchemes?: Record<string, unknown> } & Record<
    string,
    unknown
  >;
  tags?: Array<{ name: string; description?: string }>;
  [key: string]: unknown;
}

/** Security scheme names, as the routes' `security` arrays spell them. */
export const SESSION_SCHEME = 'session';
export const METRICS_KEY_SCHEME = 'metricsKey';
export const API_KEY_SCHEME = 'apiKey';

// Order of the reference page: Herald's own features first, better-auth's generic surface last.
const TAGS = [
  {
    name: 'notifications',
    description: 'The signed-in user’s notifications, preferences and live event stream.',
  },
  { name: 'admin', description: 'Administrator-only operations (admin session).' },
  {
    name: 'chat',
    description: 'Chat history and the WebSocket endpoint (protocol in docs/architecture.md).',
  },
  { name: 'operations', description: 'Health and metrics for operators and load balancers.' },
  { name: 'web app', description: 'Public settings the web app reads before anyone signs in.' },
  { name: AUTH_TAG, description: 'Accounts and sessions, served by better-auth under /auth.' },
];

// What a status means on Herald's own routes (docs/api.md#statuses); used where a route gives no description itself.
const STATUS_DESCRIPTIONS: Record<string, string> = {
  '200': 'Success',
  '304': 'Not modified: the ETag given in If-None-Match is current',
  '400': 'Invalid request: VALIDATION_ERROR (with details) or INVALID_JSON',
  '401': 'UNAUTHORIZED: no valid session (or, on /metrics, no credentials)',
  '403': 'FORBIDDEN: authenticated but not allowed',
  '404': 'NOT_FOUND: missing, or not the caller’s',
  '409': 'Conflict with the current state (see the error code)',
  '413': 'PAYLOAD_TOO_LARGE',
  '415': 'UNSUPPORTED_MEDIA_TYPE',
  '426': 'UPGRADE_REQUIRED: this endpoint only accepts WebSocket upgrades',
  '429': 'RATE_LIMITED: retry after the Retry-After header',
  '503': 'UNAVAILABLE: a dependency is down or the instance is shutting down',
};

// better-auth routes that need no session. The generator marks every route with a bearer scheme Herald does not
// use; these are the ones a signed-out client calls (sign-up, sign-in, email links, password reset).
const AUTH_PUBLIC_PATHS = [
  /^\/auth\/sign-up\//,
  /^\/auth\/sign-in\//,
  /^\/auth\/callback\//,
  /^\/auth\/oauth2\/callback\//,
  /^\/auth\/magic-link\/verify$/,
  /^\/auth\/verify-email$/,
  /^\/auth\/send-verification-email$/,
  /^\/auth\/forget-password$/,
  /^\/auth\/request-password-reset$/,
  /^\/auth\/reset-password(\/\{token\})?$/,
  /^\/auth\/is-username-available$/,
  /^\/auth\/ok$/,
  /^\/auth\/error$/,
];
// Answers for signed-out callers too (e.g. get-session returns null), but reads the session when present.
const AUTH_OPTIONAL_SESSION_PATHS = [/^\/auth\/get-session$/];

/** Given to @fastify/swagger up front: it resolves the routes' `security` names against these. */
export function securitySchemes(sessionCookieName: string) {
  return {
    [SESSION_SCHEME]: {
      type: 'apiKey' as const,
      in: 'cookie',
      name: sessionCookieName,
      description: 'The session cookie set by the /auth sign-in routes.',
    },
    [METRICS_KEY_SCHEME]: {
      type: 'http' as const,
      scheme: 'bearer',
      description: 'METRICS_API_KEY, for scrapers of GET /metrics.',
    },
    [API_KEY_SCHEME]: {
      type: 'http' as const,
      scheme: 'bearer',
      description:
        'An API key (`hk_…`, from POST /admin/api-keys) for backends: scope `notifications:send` for ' +
        'POST /admin/notifications/send, `metrics:read` for GET /metrics. Never opens a session.',
    },
  };
}

export function finishOpenApiDocument(document: OpenApiDocument, auth: AuthOpenApi): OpenApiDocument {
  const own = document.paths ?? {};
  for (const item of Object.values(own)) {
    for (const op of Object.values(item)) describeResponses(op);
  }
  const authPaths: Record<string, PathItem> = {};
  for (const [path, item] of Object.entries(auth.paths)) {
    const ops: PathItem = {};
    for (const [method, op] of Object.entries(item)) ops[method] = finishAuthOperation(path, op);
    authPaths[path] = ops;
  }
  return {
    ...document,
    tags: TAGS,
    // Herald's own routes first; /auth after them (object key order is the page's order).
    paths: { ...own, ...authPaths },
    components: {
      ...document.components,
      schemas: { ...auth.schemas, ...document.components?.schemas },
    },
  };
}

function describeResponses(op: Operation): void {
  const responses = op.responses as Responses | undefined;
  if (!responses) return;
  for (const [status, response] of Object.entries(responses)) {
    if (response.description && response.description !== 'Default Response') continue;
    response.description = STATUS_DESCRIPTIONS[status] ?? `HTTP ${status}`;
  }
}

function finishAuthOperation(path: string, op: Operation): Operation {
  const { security: _generated, ...rest } = op;
  const finished: Operation = { ...rest };
  if (AUTH_OPTIONAL_SESSION_PATHS.some((re) => re.test(path))) {
    finished.security = [{}, { [SESSION_SCHEME]: [] }];
  } else if (!AUTH_PUBLIC_PATHS.some((re) => re.test(path))) {
    finished.security = [{ [SESSION_SCHEME]: [] }];
  }
  // better-auth gives most routes a description only; the reference page lists operations by summary.
  if (typeof finished.summary !== 'string') {
    const description = typeof op.description === 'string' ? op.description : undefined;
    finished.summary = description?.split(/\.\s/)[0] ?? humanize(String(op.operationId ?? path));
  }
  if (typeof finished.description !== 'string') finished.description = `${finished.summary} (better-auth).`;
  return finished;
}

/** `stopImpersonating` → "Stop impersonating". */
function humanize(id: string): string {
  const words = id
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/[^a-zA-Z0-9]+/g, ' ')
    .trim()
    .toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** The wordmark in the /docs top bar, replacing the framework's logo. */
export const HERALD_LOGO_SVG = Buffer.from(
  '<svg xmlns="http://www.w3.org/2000/svg" width="160" height="32" viewBox="0 0 160 32">' +
    '<text x="0" y="24" font-family="sans-serif" font-size="22" font-weight="700" fill="#ffffff">Herald API</text>' +
    '</svg>',
);
