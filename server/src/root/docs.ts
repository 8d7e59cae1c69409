// The API reference: the OpenAPI 3.1 document (Herald's routes from their Zod schemas, /auth/* from
// better-auth's generator, finished by http/openapi.ts), Swagger UI at /docs and the raw document at
// /openapi.json.
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import type { Auth } from '../auth/auth.js';
import { describeAuthRoutes } from '../auth/openapi.js';
import type { Config } from '../config.js';
import {
  finishOpenApiDocument,
  HERALD_LOGO_SVG,
  type OpenApiDocument,
  securitySchemes,
} from '../http/openapi.js';
import { docsContentSecurityPolicy } from '../http/security-headers.js';

export async function registerApiDocs(app: FastifyInstance, deps: { config: Config; auth: Auth }) {
  const { config, auth } = deps;
  const authOpenApi = await describeAuthRoutes(auth);
  const sessionCookieName = (await auth.$context).authCookies.sessionToken.name;
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Herald API',
        version: '0.1.0',
        description:
          'Accounts, notifications (JSON and Server-Sent Events) and chat. Sign in through `/auth/*` to get the ' +
          'session cookie the other routes take; browser-style cookie requests that change state must also send ' +
          'an allowed `Origin`.',
      },
      servers: [{ url: config.API_BASE_URL }],
      components: { securitySchemes: securitySchemes(sessionCookieName) },
    },
    transform: jsonSchemaTransform,
    // Herald's own routes come from their Zod schemas (plus the schemas registered by id, e.g. ChatMessage);
    // /auth/* from better-auth's generator (the bridge route itself is hidden).
    transformObject: (document) => {
      if (!('openapiObject' in document)) return document.swaggerObject;
      const withRegistry = jsonSchemaTransformObject(document) as OpenApiDocument;
      return finishOpenApiDocument(withRegistry, authOpenApi) as typeof document.openapiObject;
    },
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: docsContentSecurityPolicy(config.API_BASE_URL.startsWith('https:')),
    theme: { title: 'Herald API' },
    logo: { type: 'image/svg+xml', content: HERALD_LOGO_SVG, href: '/docs' },
    uiConfig: {
      docExpansion: 'list',
      deepLinking: true,
      displayRequestDuration: true,
      tryItOutEnabled: false,
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
