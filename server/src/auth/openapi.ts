// Describes better-auth's /auth/* routes in Herald's OpenAPI document: better-auth generates their schema
// (open-api plugin); this module prefixes the paths with the mount point and tags them, once at start-up.
import type { BetterAuthOptions } from 'better-auth';
import { AUTH_TAG, type AuthOpenApi, type PathItem } from '../http/openapi.js';
import type { Auth } from './auth.js';

const HTTP_METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'options', 'head']);

export async function describeAuthRoutes(auth: Auth): Promise<AuthOpenApi> {
  const generated = (await auth.api.generateOpenAPISchema()) as unknown as {
    paths?: Record<string, PathItem>;
    components?: { schemas?: Record<string, unknown> };
  };
  const paths: Record<string, PathItem> = {};
  const disabled = disabledPaths(auth);
  for (const [path, item] of Object.entries(generated.paths ?? {})) {
    // Internal helper endpoints are not part of the public surface; disabled ones answer 404.
    if (path.startsWith('/open-api') || disabled.some((d) => path === d || path.startsWith(`${d}/`)))
      continue;
    const ops: PathItem = {};
    for (const [method, op] of Object.entries(item)) {
      if (!HTTP_METHODS.has(method)) continue;
      ops[method] = { ...op, tags: [AUTH_TAG] };
    }
    paths[`/auth${path}`] = ops;
  }
  addBridgeAdapters(paths);
  return { paths, schemas: generated.components?.schemas ?? {} };
}

/** better-auth routes that exist in its router but answer 404 with Herald's options. */
function disabledPaths(auth: Auth): string[] {
  // Read through the general options type: Herald's literal options object leaves these keys out.
  const options: BetterAuthOptions = auth.options;
  const paths = [...(options.disabledPaths ?? [])];
  // Account deletion is not enabled, so better-auth answers 404 there.
  if (!options.user?.deleteUser?.enabled) paths.push('/delete-user');
  // Nor is changing the email address: better-auth refuses every call ("Change email is disabled").
  if (!options.user?.changeEmail?.enabled) paths.push('/change-email');
  return paths;
}

/** Routes the bridge adds on top of better-auth (auth/bridge.ts): the contract's alias and POST verify-email. */
function addBridgeAdapters(paths: Record<string, PathItem>): void {
  const reset = paths['/auth/request-password-reset']?.post;
  if (reset) {
    paths['/auth/forget-password'] = {
      post: {
        ...reset,
        operationId: 'forgetPassword',
        summary: 'Request a password reset email (alias of /auth/request-password-reset)',
      },
    };
  }
  const verify = paths['/auth/verify-email']?.get;
  if (verify) {
    paths['/auth/verify-email'] = {
      ...paths['/auth/verify-email'],
      post: {
        tags: verify.tags,
        operationId: 'verifyEmailPost',
        summary: 'Verify an email address with the token from the verification email (body instead of query)',
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['token'],
                additionalProperties: false,
                properties: { token: { type: 'string', minLength: 1 }, callbackURL: { type: 'string' } },
              },
            },
          },
        },
        responses: verify.responses,
      },
    };
  }
}
