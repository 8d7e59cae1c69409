// Owns API keys: creation (random key, stored only as its SHA-256), listing, revocation, and authenticating a
// `Authorization: Bearer hk_…` header for one scope (docs/api.md#api-keys, docs/architecture.md "API keys").
// No cache: every use looks the hash up in PostgreSQL (unique index, ~0.2 ms) together with its creator's role
// and ban, so a DELETE, or a ban or demotion of the key's creator, that has returned is in force on every instance. `lastUsedAt` is batched in memory and flushed every API_KEY_LAST_USED_FLUSH_MS.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { forbidden, httpError, unauthorized as unauthorizedError } from '../http/errors.js';
import { createWindowLimiter } from '../http/rate-limit.js';
import type { Db } from '../infra/db.js';
import type { Logger } from '../infra/logger.js';
import type { Store } from '../infra/store.js';
import {
  type ApiKeyRow,
  deleteApiKey,
  findByHash,
  findById,
  insertApiKey,
  listApiKeys,
  touchApiKeys,
} from './repository.js';

export const API_KEY_SCOPES = ['notifications:send', 'metrics:read'] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

export const KEY_PREFIX = 'hk_';
/** `hk_` + base64url of 32 random bytes (256 bits). */
const KEY_PATTERN = /^hk_[A-Za-z0-9_-]{43}$/;
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A body that arrives later than this after the key check gets the key checked again (`confirm`). Below it, the
 * window in which a revocation can overtake the request is as short as the handler's own; re-reading the key for
 * every send cost about a fifth of the API-key send rate (docs/performance.md), so only a held-back body pays.
 */
export const CONFIRM_AFTER_MS = 100;

export interface ApiKeyPrincipal {
  id: string;
  name: string;
  scopes: ApiKeyScope[];
  /** performance.now() when the key was checked. */
  checkedAt: number;
}

export interface ApiKeyView {
  id: string;
  name: string;
  scopes: ApiKeyScope[];
  prefix: string;
  /** The administrator who made the key; null once that user was deleted (the key then no longer works). */
  createdBy: string | null;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
}

export interface ApiKeyService {
  create(
    input: { name: string; scopes: ApiKeyScope[]; expiresAt?: Date },
    createdBy: string | null,
  ): Promise<ApiKeyView & { key: string }>;
  list(): Promise<ApiKeyView[]>;
  /** False when no such key exists. */
  revoke(id: string): Promise<boolean>;
  /** True when the header carries a bearer token that looks like an API key (`hk_…`). */
  isApiKeyHeader(header: string | undefined): boolean;
  /** The key's principal, or 401 (unknown/revoked/expired/malformed), 403 (scope), 429 (rate limit). */
  authenticate(header: string | undefined, scope: ApiKeyScope): Promise<ApiKeyPrincipal>;
  /**
   * 401 unless the authenticated key still works (not revoked, not expired, its creator still an active admin),
   * read again when the key was checked CONFIRM_AFTER_MS or longer ago: the check again once a request's body has
   * arrived, which a client can hold back for as long as it likes.
   */
  confirm(principal: ApiKeyPrincipal): Promise<void>;
  /** Writes the batched last-use times now. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export interface ApiKeyServiceDeps {
  db: Db;
  store: Store;
  logger: Logger;
  rateLimit: { max: number; windowMs: number; storeTimeoutMs: number };
  flushMs: number;
}

const hashKey = (key: string) => createHash('sha256').update(key).digest();

const unauthorized = (message = 'A valid API key is required') => unauthorizedError(message);

function bearerToken(header: string | undefined): string | null {
  if (header === undefined) return null;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return match?.[1] ?? null;
}

/** Throws 401 when a found key no longer works: expired, or its creator's authority gone. */
function checkStanding(row: { expiresAt: Date | null; creatorActive: boolean }): void {
  if (row.expiresAt && row.expiresAt.getTime() <= Date.now()) throw unauthorized('This API key has expired');
  // A key carries its creator's authority: once they are banned, demoted or deleted it stops working.
  if (!row.creatorActive) {
    throw unauthorized('The administrator who created this API key no longer holds that role');
  }
}

export function createApiKeyService(deps: ApiKeyServiceDeps): ApiKeyService {
  const { db, logger } = deps;
  const limiter = createWindowLimiter({ store: deps.store, logger, prefix: 'apikey:rl:', ...deps.rateLimit });
  let pending = new Map<string, Date>();
  let flushing: Promise<void> = Promise.resolve();

  const view = (row: ApiKeyRow): ApiKeyView => {
    const local = pending.get(row.id);
    const last =
      local && (!row.lastUsedAt || local.getTime() > row.lastUsedAt.getTime()) ? local : row.lastUsedAt;
    return {
      id: row.id,
      name: row.name,
      scopes: row.scopes as ApiKeyScope[],
      prefix: row.prefix,
      createdBy: row.createdBy,
      createdAt: row.createdAt.toISOString(),
      expiresAt: row.expiresAt?.toISOString() ?? null,
      lastUsedAt: last?.toISOString() ?? null,
    };
  };

  const flush = () => {
    // Chained, so a shutdown flush waits for a periodic one in flight.
    flushing = flushing.then(async () => {
      if (pending.size === 0) return;
      const batch = pending;
      pending = new Map();
      try {
        await touchApiKeys(db, batch);
      } catch (err) {
        logger.warn({ err, keys: batch.size }, 'api keys: could not record last use; retrying later');
        for (const [id, at] of batch) if (!pending.has(id)) pending.set(id, at);
      }
    });
    return flushing;
  };
  const timer = setInterval(() => void flush(), deps.flushMs);
  timer.unref();

  return {
    async create(input, createdBy) {
      const key = KEY_PREFIX + randomBytes(32).toString('base64url');
      const row = await insertApiKey(db, {
        name: input.name,
        scopes: [...new Set(input.scopes)],
        prefix: key.slice(0, KEY_PREFIX.length + 8),
        keyHash: hashKey(key).toString('hex'),
        createdBy,
        expiresAt: input.expiresAt ?? null,
      });
      return { ...view(row), key };
    },
    async list() {
      return (await listApiKeys(db)).map(view);
    },
    async revoke(id) {
      if (!UUID_PATTERN.test(id)) return false;
      pending.delete(id);
      return deleteApiKey(db, id);
    },
    isApiKeyHeader(header) {
      return bearerToken(header)?.startsWith(KEY_PREFIX) ?? false;
    },
    async authenticate(header, scope) {
      const token = bearerToken(header);
      if (!token || !KEY_PATTERN.test(token)) throw unauthorized();
      const hash = hashKey(token);
      const row = await findByHash(db, hash.toString('hex'));
      // The index finds the row by hash; the final comparison is constant-time all the same.
      if (!row || !timingSafeEqual(Buffer.from(row.keyHash, 'hex'), hash)) throw unauthorized();
      checkStanding(row);
      if (!row.scopes.includes(scope)) {
        throw forbidden(`This API key lacks the ${scope} scope`);
      }
      const limited = await limiter.hit(row.id);
      if (!limited.ok) {
        const seconds = Math.max(1, Math.ceil(limited.retryAfterMs / 1000));
        throw httpError('RATE_LIMITED', 'Too many requests for this API key', {
          headers: { 'retry-after': String(seconds) },
        });
      }
      pending.set(row.id, new Date());
      return {
        id: row.id,
        name: row.name,
        scopes: row.scopes as ApiKeyScope[],
        checkedAt: performance.now(),
      };
    },
    async confirm(principal) {
      if (performance.now() - principal.checkedAt < CONFIRM_AFTER_MS) return;
      const row = await findById(db, principal.id);
      if (!row) throw unauthorized('This API key has been revoked');
      checkStanding(row);
    },
    flush,
    async close() {
      clearInterval(timer);
      limiter.close();
      await flush();
    },
  };
}
