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
  body: string;
}

export interface SendResult {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
}

export interface SenderOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  resolve: Resolver;
}

export function createSender(options: SenderOptions) {
  return async function send(request: SendRequest): Promise<SendResult> {
    const url = new URL(request.url);
    let target: Awaited<ReturnType<typeof resolveTarget>>;
    try {
      target = await resolveTarget(url, options);
    } catch (err) {
      const message = err instanceof UrlRefused ? `refused: ${err.message}` : (err as Error).message;
      return { ok: false, statusCode: null, error: message };
    }
    // Whatever name the client library asks about, the answer is the address checked above.
    const pinned: LookupFunction = (_hostname, lookupOptions, callback) => {
      if (lookupOptions.all) callback(null, [{ address: target.address, family: target.family }]);
      else callback(null, target.address, target.family);
    };
    const body = Buffer.from(request.body);
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
          // A fresh connection per attempt: a pooled socket could be to an address checked for another name.
          agent: false,
          headers: {
            ...request.headers,
            'content-type': 'application/json',
            'content-length': String(body.length),
            'user-agent': 'Herald-Webhooks/1',
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
            finish({ ok, statusCode: status, error });
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
  };
}

export type Sender = ReturnType<typeof createSender>;
