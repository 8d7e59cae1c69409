// Owns the per-client limits that keep one user, one API key or one address from taking an instance away from
// everyone else: requests in flight at once (in memory: concurrency is a property of this process) and requests
// per second (the shared fixed-window counter of http/rate-limit.ts: across instances, per instance while the
// store is down). It is the first onRequest hook, ahead of the instance-wide overload guard (http/overload.ts),
// so a client over its share gets 429 RATE_LIMITED with Retry-After before its load can trip the guard for all.
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Logger } from '../infra/logger.js';
import type { Store } from '../infra/store.js';
import { httpError } from './errors.js';
import { createWindowLimiter, type WindowLimiter } from './rate-limit.js';

export type ClientKind = 'ip' | 'user' | 'apiKey';

/** One identity a request is counted under; `label` is what a log line may show (never a secret). */
export interface ClientIdentity {
  kind: ClientKind;
  key: string;
  label: Record<string, string>;
}

export interface ClientLimitsOptions {
  /** Requests in flight per user (session) and per API key; 0 = no limit. */
  maxInFlight: number;
  /** Requests in flight per client address (request.ip, so TRUST_PROXY applies); 0 = no limit. */
  maxInFlightPerIp: number;
  /** Requests per second per user and per API key; 0 = no limit. */
  maxPerSecond: number;
  /** Requests per second per client address; 0 = no limit. */
  maxPerSecondPerIp: number;
  store: Pick<Store, 'isReady' | 'incrWindow'>;
  storeTimeoutMs: number;
  logger: Logger;
  /** The signed-in user (or, before its first lookup, the session) behind a request; null when anonymous. */
  principal(headers: FastifyRequest['headers']): Promise<ClientIdentity | null>;
  /** How often one client's refusals may be logged (one line per client and limit per interval). */
  logIntervalMs?: number;
}

export interface ClientLimits {
  /** Requests of this identity in flight now (tests, metrics). */
  inFlight(kind: ClientKind, key: string): number;
  refused(): number;
  close(): void;
}

/** Never limited: load balancers and monitoring must always get an answer. */
const EXEMPT = new Set(['/health', '/metrics']);
/** Long-lived by design (their number is bounded by SSE_MAX_STREAMS_PER_USER); counted per second only. */
const STREAMS = new Set(['/notification/stream']);

const HOLDS = Symbol('clientLimitHolds');
type WithHolds = FastifyRequest & { [HOLDS]?: ClientIdentity[] | null };

/** The API key identity of an `Authorization: Bearer hk_…` header (its hash: the key itself is a secret). */
export function apiKeyIdentity(authorization: string | undefined): ClientIdentity | null {
  const match = authorization ? /^Bearer[ \t]+(hk_\S+)/i.exec(authorization) : null;
  const token = match?.[1];
  if (!token) return null;
  const digest = createHash('sha256').update(token).digest('base64url').slice(0, 22);
  // The first 11 characters are the key's listed prefix (GET /admin/api-keys), enough to tell which key it is.
  return { kind: 'apiKey', key: digest, label: { apiKeyPrefix: token.slice(0, 11) } };
}

export function installClientLimits(app: FastifyInstance, opts: ClientLimitsOptions): ClientLimits {
  const inFlight: Record<ClientKind, Map<string, number>> = {
    ip: new Map(),
    user: new Map(),
    apiKey: new Map(),
  };
  const maxInFlight: Record<ClientKind, number> = {
    ip: opts.maxInFlightPerIp,
    user: opts.maxInFlight,
    apiKey: opts.maxInFlight,
  };
  const limiter = (kind: ClientKind, max: number): WindowLimiter | null =>
    max > 0
      ? createWindowLimiter({
          store: opts.store,
          prefix: `client:rl:${kind}:`,
          max,
          windowMs: 1_000,
          storeTimeoutMs: opts.storeTimeoutMs,
          logger: opts.logger,
        })
      : null;
  const perSecond: Record<ClientKind, WindowLimiter | null> = {
    ip: limiter('ip', opts.maxPerSecondPerIp),
    user: limiter('user', opts.maxPerSecond),
    apiKey: limiter('apiKey', opts.maxPerSecond),
  };
  const enabled =
    opts.maxInFlight > 0 || opts.maxInFlightPerIp > 0 || opts.maxPerSecond > 0 || opts.maxPerSecondPerIp > 0;
  let refusals = 0;

  // One warning per client and limit per interval: the refusals themselves must not become a log flood.
  const logIntervalMs = opts.logIntervalMs ?? 60_000;
  const lastLogged = new Map<string, number>();
  const sweep = setInterval(() => {
    const cutoff = Date.now() - logIntervalMs;
    for (const [k, at] of lastLogged) if (at < cutoff) lastLogged.delete(k);
  }, logIntervalMs);
  sweep.unref();
  const refuse = (
    who: ClientIdentity,
    limit: 'in_flight' | 'per_second',
    max: number,
    retryAfterMs: number,
  ) => {
    refusals++;
    const now = Date.now();
    const logKey = `${limit}:${who.kind}:${who.key}`;
    if ((lastLogged.get(logKey) ?? 0) + logIntervalMs <= now) {
      lastLogged.set(logKey, now);
      opts.logger.warn(
        { limit, client: who.kind, ...who.label, max },
        limit === 'in_flight'
          ? 'client limited: too many requests in flight (429)'
          : 'client limited: too many requests per second (429)',
      );
    }
    const seconds = Math.max(1, Math.ceil(retryAfterMs / 1_000));
    return httpError(
      'RATE_LIMITED',
      limit === 'in_flight'
        ? 'Too many requests in flight from this client; wait for some to finish'
        : 'Too many requests from this client; slow down',
      { headers: { 'retry-after': String(seconds) } },
    );
  };

  const release = (request: WithHolds) => {
    const holds = request[HOLDS];
    if (!holds) return;
    request[HOLDS] = null;
    for (const who of holds) {
      const map = inFlight[who.kind];
      const left = (map.get(who.key) ?? 1) - 1;
      if (left <= 0) map.delete(who.key);
      else map.set(who.key, left);
    }
  };

  if (enabled) {
    app.addHook('onRequest', async (request: WithHolds) => {
      const q = request.url.indexOf('?');
      const path = q < 0 ? request.url : request.url.slice(0, q);
      if (EXEMPT.has(path)) return;
      const who: ClientIdentity[] = [{ kind: 'ip', key: request.ip, label: { ip: request.ip } }];
      const key = apiKeyIdentity(request.headers.authorization);
      if (key) who.push(key);
      else {
        const principal = await opts.principal(request.headers);
        if (principal) who.push(principal);
      }
      // Check and take the in-flight slots in one synchronous step: 250 requests arriving together must not all
      // pass the check before any of them counts.
      if (!STREAMS.has(path)) {
        for (const w of who) {
          const max = maxInFlight[w.kind];
          if (max > 0 && (inFlight[w.kind].get(w.key) ?? 0) >= max) throw refuse(w, 'in_flight', max, 1_000);
        }
        for (const w of who) inFlight[w.kind].set(w.key, (inFlight[w.kind].get(w.key) ?? 0) + 1);
        request[HOLDS] = who;
      }
      const results = await Promise.all(
        who.map((w) => perSecond[w.kind]?.hit(w.key) ?? { ok: true as const }),
      );
      for (let i = 0; i < who.length; i++) {
        const result = results[i];
        const w = who[i];
        if (result && !result.ok && w) {
          release(request);
          throw refuse(
            w,
            'per_second',
            w.kind === 'ip' ? opts.maxPerSecondPerIp : opts.maxPerSecond,
            result.retryAfterMs,
          );
        }
      }
    });
    // Whichever comes first: the response was sent, or the client went away before it.
    app.addHook('onResponse', (request: WithHolds, _reply, done) => {
      release(request);
      done();
    });
    app.addHook('onRequestAbort', (request: WithHolds, done) => {
      release(request);
      done();
    });
  }

  return {
    inFlight: (kind, key) => inFlight[kind].get(key) ?? 0,
    refused: () => refusals,
    close() {
      clearInterval(sweep);
      for (const l of Object.values(perSecond)) l?.close();
    },
  };
}
