// A real HTTP receiver for webhook deliveries (node:http on loopback): records every request, answers as the
// test decides (a status, a redirect, or never), can go down and come back on the same port, and verifies the
// Standard Webhooks signature with its own HMAC implementation (not Herald's code).
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'drizzle-orm';
import type { App } from '../../src/app.js';

export interface Received {
  id: string;
  timestamp: number;
  signature: string;
  body: string;
  host: string;
  /** The request path (the receiver answers on any path). */
  path: string;
  /** The status this request was answered with (null: not answered). */
  answered: number | null;
}

/** What to answer a request with: a status, `{ status, headers }`, or 'hang' (never answer). */
export type Answer = number | { status: number; headers: Record<string, string> } | 'hang';

export interface WebhookReceiver {
  url(path?: string): string;
  port: number;
  received: Received[];
  /** Decides the answer per request (default 200). */
  respond: (r: Received) => Answer;
  /** Resolves once `predicate` holds for the received list. */
  until(predicate: (all: Received[]) => boolean, timeoutMs?: number): Promise<void>;
  /** Closes the listening socket (connections refused) until up(). */
  down(): Promise<void>;
  up(): Promise<void>;
  /** Answers every hung request with 200 and stops hanging. */
  releaseHung(): void;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<WebhookReceiver> {
  const received: Received[] = [];
  const hung: Array<{ res: http.ServerResponse; r: Received }> = [];
  const waiters = new Set<() => void>();
  let server: http.Server;
  let port = 0;

  const handler: http.RequestListener = (req, res) => {
    // A sender killed mid-request (SIGKILL of an instance with hung deliveries) resets the connection: that is
    // the scenario under test, not an error of the receiver, and must not surface as an uncaught ECONNRESET.
    req.on('error', () => {});
    res.on('error', () => {});
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Received = {
        id: String(req.headers['webhook-id'] ?? ''),
        timestamp: Number(req.headers['webhook-timestamp']),
        signature: String(req.headers['webhook-signature'] ?? ''),
        body: Buffer.concat(chunks).toString('utf8'),
        host: String(req.headers.host ?? ''),
        path: req.url ?? '',
        answered: null,
      };
      received.push(r);
      const answer = receiver.respond(r);
      if (answer === 'hang') hung.push({ res, r });
      else {
        const { status, headers } = typeof answer === 'number' ? { status: answer, headers: {} } : answer;
        r.answered = status;
        res.writeHead(status, headers).end('ok');
      }
      for (const w of [...waiters]) w();
    });
  };

  const listen = () =>
    new Promise<void>((resolve) => {
      server = http.createServer(handler);
      server.on('connection', (socket) => socket.on('error', () => {}));
      server.listen(port, '127.0.0.1', () => {
        port = (server.address() as AddressInfo).port;
        resolve();
      });
    });
  await listen();

  const receiver: WebhookReceiver = {
    url: (path = '/hook') => `http://127.0.0.1:${port}${path}`,
    get port() {
      return port;
    },
    received,
    respond: () => 200,
    until(predicate, timeoutMs = 30_000) {
      if (predicate(received)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate(received)) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`receiver: condition not met (${received.length} received)`));
        }, timeoutMs);
        waiters.add(check);
      });
    },
    async down() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    up: listen,
    releaseHung() {
      receiver.respond = () => 200;
      for (const { res, r } of hung.splice(0)) {
        if (res.writableEnded || res.destroyed) continue;
        r.answered = 200;
        res.writeHead(200).end('late');
      }
      for (const w of [...waiters]) w();
    },
    async close() {
      for (const { res } of hung.splice(0)) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return receiver;
}

/** Standard Webhooks verification, written independently of Herald's signer. */
export function verifySignature(secret: string, r: Received): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${r.id}.${r.timestamp}.${r.body}`).digest();
  return r.signature.split(' ').some((part) => {
    const [version, sig] = part.split(',');
    if (version !== 'v1' || !sig) return false;
    const given = Buffer.from(sig, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

export interface WebhookBody {
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
}

export const bodyOf = (r: Received) => JSON.parse(r.body) as WebhookBody;

/**
 * Between tests: no endpoint left (so no test receives another's events, and every instance of `app` knows it at
 * once), and the receiver, if any, with nothing held, nothing recorded and answering 200 again.
 */
export async function resetWebhooks(app: App, receiver?: WebhookReceiver): Promise<void> {
  receiver?.releaseHung();
  await app.ctx.database.db.execute(sql`delete from webhook_endpoint`);
  await app.ctx.webhooks.events.refresh();
  if (receiver) {
    receiver.respond = () => 200;
    receiver.received.length = 0;
  }
}
