// Owns the contract's error body and the mapping of every failure to it.
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { isDatabaseUnavailable } from '../infra/db.js';

export interface ErrorBody {
  code: string;
  message: string;
  details?: Array<{ path: string; message: string }>;
}

/**
 * The generic codes of CONTRACT §0, each with its one HTTP status: defined here once. A feature's own map
 * (notifications/errors.ts, push/errors.ts, …) holds only the codes that feature adds. Clients get both as values
 * (client/src/contract.ts is generated from contract.ts).
 */
export const GENERIC_ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  INVALID_JSON: 400,
  INVALID_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  UNAVAILABLE: 503,
} as const;
export type HttpErrorCode = keyof typeof GENERIC_ERROR_STATUS;
/** The generic codes as values (`HttpErrorCode.NOT_FOUND === 'NOT_FOUND'`). */
export const HttpErrorCode = Object.fromEntries(
  Object.keys(GENERIC_ERROR_STATUS).map((code) => [code, code]),
) as { readonly [K in HttpErrorCode]: K };

/** Throw from any handler to answer with the contract's error body. */
export class AppError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly details?: ErrorBody['details'],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'AppError';
  }
}

/** An error with a generic code; its status comes from GENERIC_ERROR_STATUS, never from the caller. */
export function httpError(
  code: HttpErrorCode,
  message: string,
  extra: { details?: ErrorBody['details']; headers?: Record<string, string> } = {},
): AppError {
  return new AppError(GENERIC_ERROR_STATUS[code], code, message, extra.details, extra.headers);
}

export const unauthorized = (message = 'A valid session is required') => httpError('UNAUTHORIZED', message);
export const forbidden = (message = 'You are not allowed to do this') => httpError('FORBIDDEN', message);
export const notFound = (message = 'Not found') => httpError('NOT_FOUND', message);
export const validationError = (
  details: NonNullable<ErrorBody['details']>,
  code: 'VALIDATION_ERROR' | 'INVALID_REQUEST' = 'VALIDATION_ERROR',
) =>
  httpError(code, details.map((d) => `${d.path || 'body'}: ${d.message}`).join('; '), {
    details,
  });

const FASTIFY_CODES: Record<string, { status: number; code: string; message: string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: {
    status: 413,
    code: 'PAYLOAD_TOO_LARGE',
    message: 'Request body is too large',
  },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    status: 415,
    code: 'UNSUPPORTED_MEDIA_TYPE',
    message: 'Content-Type must be application/json',
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    status: 400,
    code: 'INVALID_REQUEST',
    message: 'Invalid Content-Length',
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: 'INVALID_JSON', message: 'Body must be valid JSON' },
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, code: 'INVALID_JSON', message: 'Body must be valid JSON' },
};

export function sendError(
  reply: FastifyReply,
  status: number,
  body: ErrorBody,
  headers?: Record<string, string>,
) {
  if (headers) reply.headers(headers);
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

export function installErrorHandling(app: FastifyInstance): void {
  // The request id every log line carries is echoed on every response (error ones included) by
  // http/request-id.ts, on the raw response; setting it here as well was a second header write per request.
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof AppError) {
      return sendError(
        reply,
        error.statusCode,
        { code: error.code, message: error.message, details: error.details },
        error.headers,
      );
    }
    if (hasZodFastifySchemaValidationErrors(error)) {
      const details = error.validation.map((v) => ({
        path: [
          error.validationContext,
          ...String(v.instancePath ?? '')
            .split('/')
            .filter(Boolean),
        ]
          .filter(Boolean)
          .join('.'),
        message: v.message ?? 'invalid',
      }));
      return sendError(reply, 400, {
        code: 'VALIDATION_ERROR',
        message: details.map((d) => `${d.path}: ${d.message}`).join('; '),
        details,
      });
    }
    const mapped = error.code ? FASTIFY_CODES[error.code] : undefined;
    if (mapped) return sendError(reply, mapped.status, { code: mapped.code, message: mapped.message });
    if (error instanceof SyntaxError) {
      return sendError(reply, 400, { code: 'INVALID_JSON', message: 'Body must be valid JSON' });
    }
    if (error.statusCode === 429) {
      return sendError(reply, 429, { code: 'RATE_LIMITED', message: 'Too many requests' });
    }
    if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
      return sendError(reply, error.statusCode, { code: 'BAD_REQUEST', message: error.message });
    }
    if (isDatabaseUnavailable(error)) {
      // A lost or refused database connection (failover, pooler restart, connections killed): the request may
      // succeed on a retry, so 503 rather than 500. One warn line per request, without the stack.
      request.log.warn({ err: error.message }, 'database unavailable');
      return sendError(
        reply,
        503,
        { code: 'UNAVAILABLE', message: 'The database is unavailable; retry shortly' },
        { 'retry-after': '1' },
      );
    }
    if (isResponseSerializationError(error)) {
      request.log.error({ err: error, issues: error.cause.issues }, 'response did not match its schema');
    } else {
      request.log.error({ err: error }, 'unhandled error');
    }
    return sendError(reply, 500, { code: 'INTERNAL_ERROR', message: 'Internal server error' });
  });

  app.setNotFoundHandler((request, reply) =>
    sendError(reply, 404, {
      code: 'NOT_FOUND',
      message: `Route ${request.method} ${request.url.split('?')[0]} not found`,
    }),
  );
}

/**
 * Errors Fastify's router raises before any route or hook runs (a malformed percent-encoding, a path parameter
 * longer than maxParamLength), answered in the contract's error body instead of Fastify's own.
 */
export function frameworkErrorHandler(error: FastifyError, _request: unknown, reply: FastifyReply) {
  // An over-long id can never name a stored resource: answer like any other unknown id.
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return sendError(reply, 404, { code: 'NOT_FOUND', message: 'Not found' });
  }
  return sendError(reply, 400, { code: 'INVALID_REQUEST', message: 'Malformed request URL' });
}

const CLIENT_ERRORS: Record<string, { status: number; code: string; message: string }> = {
  ERR_HTTP_REQUEST_TIMEOUT: {
    status: 408,
    code: 'REQUEST_TIMEOUT',
    message: 'The request was not received in time',
  },
  HPE_HEADER_OVERFLOW: {
    status: 431,
    code: 'HEADERS_TOO_LARGE',
    message: 'Request headers are too large',
  },
};

/**
 * Errors Node's HTTP parser raises on a connection (request or headers timeout, header overflow, malformed
 * request): answered with the contract's error body, then the connection is closed.
 */
export function clientErrorHandler(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Socket) {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const mapped = (err.code && CLIENT_ERRORS[err.code]) || {
    status: 400,
    code: 'INVALID_REQUEST',
    message: 'Malformed request',
  };
  this.log.debug({ code: err.code, status: mapped.status }, 'client error');
  const body = JSON.stringify({ code: mapped.code, message: mapped.message });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${mapped.status} ${STATUS_TEXT[mapped.status] ?? 'Bad Request'}\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};
