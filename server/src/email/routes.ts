// Owns the one-click unsubscribe endpoint (CONTRACT §12, RFC 8058): POST with a signed token and no session
// changes exactly what the token names; GET only sends the browser to the web app's confirmation page.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AppError } from '../http/errors.js';
import { ErrorSchema } from '../http/schemas.js';
import type { NotificationRepository } from '../notifications/repository.js';
import type { NotificationType } from '../notifications/schemas.js';
import type { UnsubscribeTokens } from './tokens.js';

export const UNSUBSCRIBE_PATH = '/notification/unsubscribe';

export const EmailErrorCode = {
  INVALID_UNSUBSCRIBE_TOKEN: 'INVALID_UNSUBSCRIBE_TOKEN',
  UNSUBSCRIBE_TOKEN_EXPIRED: 'UNSUBSCRIBE_TOKEN_EXPIRED',
} as const;

const Query = z.object({
  token: z.string().min(1).max(1024).describe('The signed token from the email’s List-Unsubscribe link'),
});
const Result = z
  .object({
    unsubscribed: z.literal(true),
    scope: z.enum(['type', 'all']),
    type: z.string().nullable().describe('The notification type no longer emailed (scope "type")'),
  })
  .meta({ example: { unsubscribed: true, scope: 'type', type: 'mention' } });
const tags = ['notifications'];

export function registerUnsubscribeRoutes(
  app: FastifyInstance,
  deps: {
    tokens: UnsubscribeTokens;
    repo: Pick<NotificationRepository, 'unsubscribeEmail'>;
    feBaseUrl: string;
  },
): void {
  app.register(async (scope) => {
    // RFC 8058: the mailbox provider posts "List-Unsubscribe=One-Click" form-encoded, without cookie or Origin.
    // This scope is the only place outside /auth that accepts a form body (and nothing in it is needed).
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: 4096 },
      (_req, body, done) => done(null, Object.fromEntries(new URLSearchParams(String(body)))),
    );
    const r = scope.withTypeProvider<ZodTypeProvider>();
    r.post(
      UNSUBSCRIBE_PATH,
      {
        schema: {
          tags,
          summary: 'One-click unsubscribe (RFC 8058), no session',
          description:
            'Removes the token’s notification type from the user’s `emailTypes`, or with a token for every email sets `emailEnabled: false`. Body: `List-Unsubscribe=One-Click` (`application/x-www-form-urlencoded`) or none; no cookie or Origin needed. Tampered or malformed token → 400 `INVALID_UNSUBSCRIBE_TOKEN`; expired → 410 `UNSUBSCRIBE_TOKEN_EXPIRED`. Repeating it is harmless.',
          querystring: Query,
          response: { 200: Result, 400: ErrorSchema, 410: ErrorSchema, 415: ErrorSchema },
        },
      },
      async (request) => {
        const verified = deps.tokens.verify(request.query.token);
        if (!verified.ok) {
          if (verified.reason === 'expired') {
            throw new AppError(
              410,
              EmailErrorCode.UNSUBSCRIBE_TOKEN_EXPIRED,
              'This unsubscribe link has expired; change your email preferences in the app instead',
            );
          }
          throw new AppError(
            400,
            EmailErrorCode.INVALID_UNSUBSCRIBE_TOKEN,
            'The unsubscribe token is not valid',
          );
        }
        const target = verified.target;
        const type = target.scope === 'type' ? (target.type as NotificationType) : null;
        // A deleted user has nothing left to unsubscribe from: still a success (providers retry on errors).
        await deps.repo.unsubscribeEmail(target.userId, type);
        return { unsubscribed: true as const, scope: target.scope, type };
      },
    );
    r.get(
      UNSUBSCRIBE_PATH,
      {
        schema: {
          tags,
          summary: 'Unsubscribe link opened in a browser: redirects to the confirmation page',
          description:
            'Changes nothing (link scanners and prefetchers follow GET links): answers 303 to the web app’s `/unsubscribe?token=…` page, which asks before it POSTs.',
          querystring: Query,
          response: { 303: z.null().describe('Redirect to the confirmation page'), 400: ErrorSchema },
        },
      },
      async (request, reply) =>
        reply
          .header('cache-control', 'no-store')
          .redirect(`${deps.feBaseUrl}/unsubscribe?token=${encodeURIComponent(request.query.token)}`, 303),
    );
  });
}
