// A real `ws` client for chat tests: records every server event, awaits events by predicate and the close code.
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import type { App } from '../../src/app.js';
import { TEST_ORIGIN } from './app.js';

// biome-ignore lint/suspicious/noExplicitAny: server events are inspected loosely in tests
export type ChatEvent = { type: string } & Record<string, any>;

export interface ChatClient {
  ws: WebSocket;
  /** Every event received so far, in order (never consumed). */
  log: ChatEvent[];
  /** Resolves with the first not-yet-taken event matching; takes it. */
  next(type: string, predicate?: (e: ChatEvent) => boolean, timeoutMs?: number): Promise<ChatEvent>;
  send(frame: unknown): void;
  sendRaw(data: string | Buffer, binary?: boolean): void;
  /** Resolves when the socket closes. */
  closed: Promise<{ code: number; reason: string }>;
  close(): Promise<void>;
}

export function chatUrl(target: App | string): string {
  if (typeof target === 'string') return target;
  const address = target.server.address() as AddressInfo;
  return `ws://127.0.0.1:${address.port}/chat`;
}

export interface OpenOptions {
  cookie?: string;
  origin?: string | null;
  headers?: Record<string, string>;
  /** Wait for connected + message_history (default true). */
  ready?: boolean;
  /** Raw `ws` client options (e.g. autoPong: false for a peer that never answers pings). */
  wsOptions?: WebSocket.ClientOptions;
}

export class UpgradeRefused extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`upgrade refused: ${status} ${body}`);
  }
}

export function openChat(target: App | string, options: OpenOptions = {}): Promise<ChatClient> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  const origin = options.origin === undefined ? TEST_ORIGIN : options.origin;
  if (origin !== null) headers.origin = origin;
  if (options.cookie) headers.cookie = options.cookie;
  const ws = new WebSocket(chatUrl(target), { headers, perMessageDeflate: false, ...options.wsOptions });
  const log: ChatEvent[] = [];
  const pending: ChatEvent[] = [];
  const waiters: Array<{ match: (e: ChatEvent) => boolean; resolve: (e: ChatEvent) => void }> = [];
  ws.on('message', (data) => {
    const event = JSON.parse(String(data)) as ChatEvent;
    log.push(event);
    const i = waiters.findIndex((w) => w.match(event));
    if (i >= 0) {
      const [w] = waiters.splice(i, 1);
      w?.resolve(event);
    } else pending.push(event);
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  const client: ChatClient = {
    ws,
    log,
    next(type, predicate = () => true, timeoutMs = 10_000) {
      const match = (e: ChatEvent) => e.type === type && predicate(e);
      const i = pending.findIndex(match);
      if (i >= 0) return Promise.resolve(pending.splice(i, 1)[0] as ChatEvent);
      return new Promise((resolve, reject) => {
        const waiter = { match, resolve };
        waiters.push(waiter);
        setTimeout(() => {
          const j = waiters.indexOf(waiter);
          if (j >= 0) {
            waiters.splice(j, 1);
            reject(
              new Error(
                `timed out waiting for "${type}"; last events: ${log
                  .slice(-5)
                  .map((e) => JSON.stringify(e).slice(0, 200))
                  .join(' | ')}`,
              ),
            );
          }
        }, timeoutMs).unref();
      });
    },
    send: (frame) => ws.send(JSON.stringify(frame)),
    sendRaw: (data, binary = false) => ws.send(data, { binary }),
    closed,
    async close() {
      if (ws.readyState === WebSocket.CLOSED) return;
      ws.close();
      await closed;
    },
  };
  return new Promise((resolve, reject) => {
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => {
        body += c.toString();
      });
      res.on('end', () => reject(new UpgradeRefused(res.statusCode ?? 0, body)));
    });
    ws.once('error', reject);
    ws.once('open', () => {
      ws.off('error', reject);
      ws.on('error', () => {});
      if (options.ready === false) return resolve(client);
      Promise.all([client.next('connected'), client.next('message_history')]).then(
        () => resolve(client),
        reject,
      );
    });
  });
}

/** Resolves with the HTTP status of a refused upgrade (throws if the upgrade succeeds). */
export async function refusedStatus(
  target: App | string,
  options: OpenOptions = {},
): Promise<UpgradeRefused> {
  try {
    const c = await openChat(target, { ...options, ready: false });
    await c.close();
  } catch (err) {
    if (err instanceof UpgradeRefused) return err;
    throw err;
  }
  throw new Error('upgrade was accepted');
}
