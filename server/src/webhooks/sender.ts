// Owns one delivery attempt over HTTP(S): resolve and check the target (ssrf.ts), connect to exactly that
// address (a custom `lookup` pins it, so no second DNS answer is ever used), POST the signed body, and read at
// most MAX_RESPONSE_BYTES of the answer within the timeout. Redirects are never followed: a 3xx is a failure.
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { type Resolver, resolveTarget, UrlRefused } from './ssrf.js';

/** Response bytes read at most; a larger answer is cut off (the attempt still counts by its status code). */
export const MAX_RESPONSE_BYTES = 64 * 1024;

export interface SendRequest {
  url: string;
  headers: Record<string, string>;
  body: string | Buffer;
  /** Default application/json (webhooks); Web Push sends application/octet-stream. */
  contentType?: string;
  /** Default Herald-Webhooks/1. */
  userAgent?: string;
}

export interface SendResult {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  /** The answer's Retry-After header, when it had one (Web Push honours it). */
  retryAfter?: string;
  /** True when the SSRF rules refused the target's address (no request was made). */
  refused?: boolean;
}

export interface SenderOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  resolve: Resolver;
}

/** A kept-alive connection pool unused for this long is closed. */
const AGENT_IDLE_MS = 30_000;

export function createSender(options: SenderOptions) {
  // Kept-alive pools, one per URL origin *and checked address*: a pooled socket is only ever reused for the
  // address it was connected to, which the current attempt has just checked again.
  const agents = new Map<string, { agent: http.Agent; usedAt: number }>();
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [key, entry] of agents) {
      if (now - entry.usedAt < AGENT_IDLE_MS) continue;
      entry.agent.destroy();
      agents.delete(key);
    }
  }, AGENT_IDLE_MS);
  sweep.unref();
  const agentFor = (url: URL, address: string) => {
    const key = `${url.protocol}//${url.host}|${address}`;
    let entry = agents.get(key);
    if (!entry) {
      const Agent = url.protocol === 'https:' ? https.Agent : http.Agent;
      entry = { agent: new Agent({ keepAlive: true }), usedAt: 0 };
      agents.set(key, entry);
    }
    entry.usedAt = Date.now();
    return entry.agent;
  };

  async function send(request: SendRequest): Promise<SendResult> {
    const url = new URL(request.url);
    let target: Awaited<ReturnType<typeof resolveTarget>>;
    try {
      target = await resolveTarget(url, options);
    } catch (err) {
      const refused = err instanceof UrlRefused;
      const message = refused ? `refused: ${err.message}` : (err as Error).message;
      return { ok: false, statusCode: null, error: message, refused };
    }
    // Whatever name the client library asks about, the answer is the address checked above.
    const pinned: LookupFunction = (_hostname, lookupOptions, callback) => {
      if (lookupOptions.all) callback(null, [{ address: target.address, family: target.family }]);
      else callback(null, target.address, target.family);
    };
    const body = typeof request.body === 'string' ? Buffer.from(request.body) : request.body;
    const client = url.protocol === 'https:' ? https : http;
    return new Promise<SendResult>((resolve) => {
      let settled = false;
      const finish = (result: SendResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(result);
      };
      const req = client.request(
        url,
        {
          method: 'POST',
          lookup: pinned,
          agent: agentFor(url, target.address),
          headers: {
            ...request.headers,
            'content-type': request.contentType ?? 'application/json',
            'content-length': String(body.length),
            'user-agent': request.userAgent ?? 'Herald-Webhooks/1',
          },
        },
        (res) => {
          const status = res.statusCode ?? 0;
          let read = 0;
          const done = () => {
            const ok = status >= 200 && status < 300;
            let error: string | null = null;
            if (status >= 300 && status < 400) error = `redirect (${status}) not followed`;
            else if (!ok) error = `HTTP ${status}`;
            const retryAfter = res.headers['retry-after'];
            finish({ ok, statusCode: status, error, ...(retryAfter ? { retryAfter } : {}) });
            res.destroy();
          };
          res.on('data', (chunk: Buffer) => {
            read += chunk.length;
            // Enough is known from the status; a receiver streaming without end must not hold the worker.
            if (read >= MAX_RESPONSE_BYTES) done();
          });
          res.on('end', done);
          res.on('error', (err) => finish({ ok: false, statusCode: status, error: err.message }));
        },
      );
      const timer = setTimeout(() => {
        finish({ ok: false, statusCode: null, error: `timed out after ${options.timeoutMs} ms` });
        req.destroy();
      }, options.timeoutMs);
      req.on('error', (err) => finish({ ok: false, statusCode: null, error: err.message }));
      req.end(body);
    });
  }

  return Object.assign(send, {
    close() {
      clearInterval(sweep);
      for (const { agent } of agents.values()) agent.destroy();
      agents.clear();
    },
  });
}

export type Sender = ReturnType<typeof createSender>;
