// Owns the per-client-address cap on open TCP connections to the HTTP server (SSE streams and WebSockets
// included, since they are HTTP connections first). Request, header and keep-alive timeouts bound how long one
// connection can be held; this bounds how many one address can hold. A connection from a proxy that TRUST_PROXY
// trusts is not capped: it carries many clients' requests, and who they are is known only per request (from
// X-Forwarded-For), where the per-client limits of http/client-limits.ts count them by that address.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../infra/logger.js';

export interface ConnectionLimits {
  /** Open connections of one address (tests and metrics). */
  openFrom(address: string): number;
}

export function installConnectionLimits(
  server: Server,
  opts: { maxPerIp: number; logger: Logger; trustedProxy?: (address: string) => boolean },
): ConnectionLimits {
  const open = new Map<string, number>();
  // The address each counted connection was counted under, for its release: one shared close listener then
  // serves every connection, where a `once` wrapper around a closure per connection kept ~230 B for as long as
  // the connection lives (hours for an SSE stream; docs/performance.md "Idle SSE memory").
  const counted = new Map<Socket, string>();
  function release(this: Socket) {
    const address = counted.get(this);
    if (address === undefined) return;
    counted.delete(this);
    const left = (open.get(address) ?? 1) - 1;
    if (left <= 0) open.delete(address);
    else open.set(address, left);
  }
  // Refusals are logged at most once per address per interval, so a flood cannot flood the log too.
  const lastLogged = new Map<string, number>();
  if (opts.maxPerIp > 0) {
    server.on('connection', (socket: Socket) => {
      const address = socket.remoteAddress ?? 'unknown';
      if (opts.trustedProxy?.(address)) return;
      const count = open.get(address) ?? 0;
      if (count >= opts.maxPerIp) {
        const now = Date.now();
        if ((lastLogged.get(address) ?? 0) + 60_000 < now) {
          lastLogged.set(address, now);
          opts.logger.warn(
            { address, limit: opts.maxPerIp },
            'connection refused: too many from this address',
          );
        }
        // No HTTP response: the request has not been read yet, and answering would mean serving the connection
        // the cap exists to refuse. The client sees the connection closed (ECONNRESET / "socket hang up").
        socket.destroy();
        return;
      }
      open.set(address, count + 1);
      counted.set(socket, address);
      socket.on('close', release);
    });
  }
  return { openFrom: (address) => open.get(address) ?? 0 };
}
