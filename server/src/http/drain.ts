// Owns the request drain of a graceful shutdown (CONTRACT §8 "Shutdown drains"): tracks the requests this instance
// has received and not yet answered, and on shutdown stops accepting connections, waits up to SHUTDOWN_GRACE_MS
// for those requests to finish, then cuts the rest short: their work is told (an AbortSignal, and callbacks that
// may release what they hold, e.g. an idempotency claim) and they are answered 503 UNAVAILABLE, so no request is
// reset mid-response and nothing runs on after the pools close. SSE streams (hijacked replies) and WebSocket
// upgrades are not requests in this sense: the shutdown phases after the drain end them.
import type { ServerResponse } from 'node:http';
import { Server as NetServer, Socket } from 'node:net';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Logger } from '../infra/logger.js';
import { withTimeout } from '../infra/timeout.js';
import { httpError, sendError } from './errors.js';

/** What long-running work sees of the drain: a signal and a hook to release what it holds when cut short. */
export interface CutShort {
  /** Aborted (reason: a 503 UNAVAILABLE AppError) when the grace ends with requests still running. */
  readonly signal: AbortSignal;
  /**
   * Runs `release` at that moment, before the still-running requests are answered 503 (so a client retrying
   * on another instance right after the 503 finds it released). Returns the disposer: call it when the work
   * has ended (finished, failed or unwound after the abort). The drain waits, within its budget, for every
   * registered work to call it before the shutdown goes on to close the pools: work still unwinding after the
   * abort (a query already sent, a cache bump) must not find the pools closed under it.
   */
  onCutShort(release: () => Promise<void> | void): () => void;
}

export interface RequestDrain extends CutShort {
  /** Requests received and not yet answered (SSE streams excluded). */
  inFlight(): number;
  /** Stops accepting connections, waits up to the grace for in-flight requests, then cuts the rest short. */
  drain(): Promise<{ finished: number; cutShort: number }>;
}

export interface DrainOptions {
  graceMs: number;
  logger: Logger;
  /** How long a kept-alive connection between requests is waited for (default KEPT_ALIVE_WAIT_MS). */
  keptAliveWaitMs?: number;
}

/** Bound on the cut-short releases and on flushing the 503s: the pools close after this. */
const CUT_SHORT_BUDGET_MS = 2_000;
/** How long the drain waits for the first request of a connection accepted just before the listener closed. */
const FRESH_CONNECTION_WAIT_MS = 1_000;
/**
 * How long it waits for the next request on a connection kept alive between requests. Short: only a request sent
 * before the client could see the drain start is waited for (one network delay); a client that keeps an idle
 * connection open for minutes (a browser) must not hold the shutdown up, and background work (a broadcast under
 * way) goes on until the drain ends.
 */
const KEPT_ALIVE_WAIT_MS = 100;

const CUT_SHORT_MESSAGE = 'The server is shutting down; retry the request (on another instance)';

/**
 * What the drain keeps per connection, as one property of the socket itself: FRESH until its first request starts,
 * then the reply it is answering (several only with HTTP pipelining), or null between requests.
 */
const FRESH = Symbol('fresh');
const kRequests = Symbol('herald.drain');
type Requests = typeof FRESH | FastifyReply | FastifyReply[] | null;
type TrackedSocket = Socket & { [kRequests]?: Requests };

const repliesOf = (state: Requests | undefined): FastifyReply[] =>
  state === undefined || state === null || state === FRESH ? [] : Array.isArray(state) ? state : [state];

export function installRequestDrain(app: FastifyInstance, options: DrainOptions): RequestDrain {
  // The open connections. Requests are found through their connection, never kept in a collection of their own:
  // a Map or Set that takes in and drops a young object per request kept the dropped ones reachable from its
  // old-space table until the next full collection, so every scavenge copied and promoted the requests in flight
  // with everything they referenced (~12 MB per scavenge at 25k req/s, a fifth of the busy time; docs/performance.md
  // "Request tracking and the young generation"). A connection enters and leaves once, however many requests it
  // carries.
  const connections = new Set<TrackedSocket>();
  const releases = new Set<() => Promise<void> | void>();
  // Registered work that has not called its disposer yet; a cut-short run stays here until it has unwound.
  const working = new Set<() => Promise<void> | void>();
  let unwound: (() => void) | undefined;
  const controller = new AbortController();
  let idle: (() => void) | undefined;

  // A reply taken over by its route (an SSE stream) is long-lived by design: the drain does not wait for it.
  const pending = (): FastifyReply[] => {
    const left: FastifyReply[] = [];
    for (const socket of connections) {
      for (const reply of repliesOf(socket[kRequests])) {
        if (!(reply.sent && !reply.raw.writableEnded)) left.push(reply);
      }
    }
    return left;
  };
  // Connections with no request in progress: accepted but not yet used, or kept alive between requests. The
  // client may have sent a request on one already (a browser's first request, or a busy client's next one the
  // instant its last response arrived), so the drain waits for them briefly (FRESH_CONNECTION_WAIT_MS,
  // KEPT_ALIVE_WAIT_MS), and a request that arrives meanwhile is answered (Fastify marks every answer of a
  // closing server `Connection: close`, so the client then leaves).
  // A connection still idle when that wait ends is closed by the drain itself: nothing may be read after the
  // drain, since Fastify destroys every connection once the shutdown phases have run, and a request read in
  // between would be reset mid-way (a busy keep-alive client saw exactly that).
  let freshUntil = Number.POSITIVE_INFINITY;
  let keptAliveUntil = Number.POSITIVE_INFINITY;
  const isIdle = (state: Requests | undefined) => state === FRESH || state === null;
  const anyIdle = () => {
    const now = Date.now();
    for (const socket of connections) {
      const state = socket[kRequests];
      if ((state === FRESH && now < freshUntil) || (state === null && now < keptAliveUntil)) return true;
    }
    return false;
  };
  const closeIdle = () => {
    for (const socket of connections) if (isIdle(socket[kRequests])) socket.destroy();
  };
  const settled = () => pending().length === 0 && !anyIdle();

  // One listener function each, shared by every socket and response (EventEmitter calls it with the emitter as
  // `this`), rather than a `once` wrapper around a new closure per connection and per request: an SSE stream
  // keeps its socket and response for hours, and each such pair is ~230 B (docs/performance.md "Idle SSE
  // memory"). A second 'close' would only find nothing left to delete.
  function onConnectionClose(this: TrackedSocket) {
    connections.delete(this);
    if (idle && settled()) idle();
  }
  const track = (socket: TrackedSocket) => {
    if (socket[kRequests] !== undefined) return;
    socket[kRequests] = FRESH;
    // An injected request (app.inject) brings a stand-in socket that never closes: not a connection to drain.
    if (!(socket instanceof Socket)) return;
    connections.add(socket);
    socket.on('close', onConnectionClose);
  };
  // 'close' fires once the response is fully written or the connection went away, whichever comes first. By
  // then Node has detached the response from its socket; its request still names the connection.
  function onResponseClose(this: ServerResponse) {
    const socket: TrackedSocket = this.req.socket;
    const state = socket[kRequests];
    if (Array.isArray(state)) {
      const left = state.filter((reply) => reply.raw !== this);
      socket[kRequests] = left.length > 1 ? left : (left[0] ?? null);
    } else if (state !== undefined && state !== null && state !== FRESH && state.raw === this) {
      socket[kRequests] = null;
    }
    if (idle && settled()) idle();
  }

  // Every connection, including one that never sends a request. Herald serves plain HTTP (TLS ends in front of
  // it, deploy/), so this is the socket its requests arrive on; onRequest also tracks one it has not seen here.
  app.server.on('connection', track);
  // A WebSocket upgrade is not a request of this drain (the shutdown phases after it close chat sockets): the
  // socket leaves the set and keeps no listener of ours for the hours it may stay open.
  app.server.prependListener('upgrade', (_req, socket: TrackedSocket) => {
    socket[kRequests] = null;
    if (connections.delete(socket)) socket.removeListener('close', onConnectionClose);
  });

  app.addHook('onRequest', (request, reply, done) => {
    const socket: TrackedSocket = request.raw.socket;
    track(socket);
    const state = socket[kRequests];
    if (state === undefined || state === null || state === FRESH) socket[kRequests] = reply;
    else socket[kRequests] = Array.isArray(state) ? [...state, reply] : [state, reply];
    reply.raw.on('close', onResponseClose);
    done();
  });

  return {
    signal: controller.signal,
    onCutShort(release) {
      releases.add(release);
      working.add(release);
      return () => {
        releases.delete(release);
        working.delete(release);
        if (working.size === 0) unwound?.();
      };
    },
    inFlight: () => pending().length,
    async drain() {
      // No new connections from here on (Fastify closes the listener again later and ignores that it is
      // closed). net's close, not http's: http's would also close every connection without an active request at
      // once, including ones whose request is on its way (see freshUntil above).
      NetServer.prototype.close.call(app.server);
      const start = Date.now();
      freshUntil = start + Math.min(options.graceMs, FRESH_CONNECTION_WAIT_MS);
      keptAliveUntil = start + Math.min(options.graceMs, options.keptAliveWaitMs ?? KEPT_ALIVE_WAIT_MS);
      const before = pending().length;
      if (!settled()) {
        options.logger.info({ inFlight: before, graceMs: options.graceMs }, 'waiting for in-flight requests');
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, options.graceMs);
          // Re-checked when each wait for idle connections ends (nothing else may happen then).
          const idleTimers = [freshUntil, keptAliveUntil].map((until) =>
            setTimeout(() => idle?.(), until - Date.now() + 1),
          );
          idle = () => {
            if (!settled()) return;
            clearTimeout(timer);
            for (const t of idleTimers) clearTimeout(t);
            resolve();
          };
        });
        idle = undefined;
      }
      // From here on no connection is waited for unless it has a request in progress.
      closeIdle();
      const left = pending();
      if (left.length === 0) return { finished: before, cutShort: 0 };

      options.logger.warn(
        { cutShort: left.length, graceMs: options.graceMs },
        'shutdown grace over: answering the requests still running 503',
      );
      controller.abort(httpError('UNAVAILABLE', CUT_SHORT_MESSAGE, { headers: { 'retry-after': '1' } }));
      // Releases first: a client that retries elsewhere on our 503 must find the work released.
      await withTimeout(
        Promise.allSettled([...releases].map(async (release) => release())),
        CUT_SHORT_BUDGET_MS,
      ).catch(() => options.logger.error('shutdown: releasing cut-short work timed out'));
      const flushed = left.map((reply) => {
        if (reply.raw.writableEnded) return Promise.resolve();
        const done = new Promise<void>((resolve) => reply.raw.once('close', () => resolve()));
        // A response already under way (headers sent) is left to finish; only unanswered ones get the 503.
        if (!reply.raw.headersSent) {
          sendError(
            reply,
            503,
            { code: 'UNAVAILABLE', message: CUT_SHORT_MESSAGE },
            { 'retry-after': '1', connection: 'close' },
          );
        }
        return done;
      });
      await withTimeout(Promise.all(flushed), CUT_SHORT_BUDGET_MS).catch(() => {});
      // The aborted work checks its signal between steps: let the step under way end before the pools close.
      if (working.size > 0) {
        await withTimeout(
          new Promise<void>((resolve) => {
            unwound = resolve;
          }),
          CUT_SHORT_BUDGET_MS,
        ).catch(() =>
          options.logger.warn(
            { running: working.size },
            'shutdown: cut-short work still unwinding; closing the pools',
          ),
        );
        unwound = undefined;
      }
      return { finished: before - left.length, cutShort: left.length };
    },
  };
}
