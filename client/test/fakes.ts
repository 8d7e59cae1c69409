// Test doubles for what cannot be made to misbehave on demand for real in a unit test: a fetch whose SSE
// streams the test writes and ends, a page environment (online/offline, visibility), a Web Locks manager and a
// WebSocket. The integration tests (integration.test.ts) use the real server instead.
import type { ChatMessage, ChatServerEvent, Notification } from '../src/contract.js';
import type { ClientEnvironment, EnvironmentEvent } from '../src/environment.js';
import type { LockManagerLike } from '../src/feed.js';
import type { WebSocketLike } from '../src/index.js';

const enc = new TextEncoder();

/** Polls `check` until it returns a truthy value (bounded, so a broken expectation fails instead of hanging). */
export async function waitFor<T>(check: () => T | undefined | null | false, what = 'condition'): Promise<T> {
  for (let i = 0; i < 2000; i++) {
    const v = check();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

export interface FakeStream {
  url: string;
  headers: Headers;
  /** Writes one SSE event; `split` cuts its bytes in two writes at that offset. */
  event(id: number | string, data: { type: string } & Record<string, unknown>, split?: number): void;
  raw(text: string): void;
  /** Ends the response body (server closed the stream). */
  end(): void;
  /** The client aborted this request (reconnect, offline, stop). */
  aborted: boolean;
}

export function notification(id: string, extra: Partial<Notification> = {}): Notification {
  return {
    id,
    userId: 'u1',
    type: 'info',
    title: `title ${id}`,
    content: `content ${id}`,
    metadata: {},
    read: false,
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
    ...extra,
  };
}

/** A fetch that answers the notification routes the feed uses; streams are controlled by the test. */
export class FakeHerald {
  streams: FakeStream[] = [];
  listCalls = 0;
  countCalls = 0;
  items: Notification[] = [];
  unread = 0;
  /** Next stream requests answered with this status instead of a stream. */
  streamStatus: number[] = [];

  fetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const url = String(input);
    const path = new URL(url).pathname;
    if (path === '/notification/list') {
      this.listCalls++;
      return Response.json({
        notifications: this.items,
        pagination: {
          page: 1,
          limit: 20,
          totalCount: this.items.length,
          totalPages: 1,
          hasNextPage: false,
          hasPreviousPage: false,
        },
      });
    }
    if (path === '/notification/unread-count') {
      this.countCalls++;
      return Response.json({ unreadCount: this.unread });
    }
    if (path !== '/notification/stream')
      return Response.json({ code: 'NOT_FOUND', message: path }, { status: 404 });
    const status = this.streamStatus.shift();
    if (status !== undefined) {
      const fake = { url, headers: new Headers(init.headers), aborted: false } as FakeStream;
      fake.event = fake.raw = fake.end = () => {};
      this.streams.push(fake);
      return Response.json(
        { code: status === 401 ? 'UNAUTHORIZED' : 'UNAVAILABLE', message: 'no' },
        { status },
      );
    }
    let controller!: ReadableStreamDefaultController<Uint8Array>;
    let closed = false;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        controller = c;
      },
    });
    const stream: FakeStream = {
      url,
      headers: new Headers(init.headers),
      aborted: false,
      raw(text) {
        if (!closed) controller.enqueue(enc.encode(text));
      },
      event(id, data, split) {
        const bytes = enc.encode(`id: ${id}\nevent: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`);
        if (closed) return;
        if (split === undefined) controller.enqueue(bytes);
        else {
          controller.enqueue(bytes.subarray(0, split));
          controller.enqueue(bytes.subarray(split));
        }
      },
      end() {
        if (closed) return;
        closed = true;
        controller.close();
      },
    };
    init.signal?.addEventListener('abort', () => {
      stream.aborted = true;
      if (!closed) {
        closed = true;
        controller.error(new DOMException('The operation was aborted', 'AbortError'));
      }
    });
    this.streams.push(stream);
    return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
  };

  get last(): FakeStream {
    const s = this.streams[this.streams.length - 1];
    if (!s) throw new Error('no stream yet');
    return s;
  }
}

/** A page environment the test drives. */
export class FakeEnvironment implements ClientEnvironment {
  online = true;
  visible = true;
  private listeners = new Map<EnvironmentEvent, Set<() => void>>();
  isOnline = () => this.online;
  isVisible = () => this.visible;
  on(event: EnvironmentEvent, listener: () => void) {
    let set = this.listeners.get(event);
    if (!set) {
      set = new Set();
      this.listeners.set(event, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
    };
  }
  fire(event: EnvironmentEvent) {
    if (event === 'online') this.online = true;
    if (event === 'offline') this.online = false;
    if (event === 'visible') this.visible = true;
    for (const l of [...(this.listeners.get(event) ?? [])]) l();
  }
}

/** Exclusive locks by name, granted in request order, as navigator.locks does. */
export class FakeLocks implements LockManagerLike {
  private holders = new Map<string, boolean>();
  private waiting = new Map<string, Array<() => void>>();

  isHeld(name: string): boolean {
    return this.holders.get(name) === true;
  }

  async request<T>(
    name: string,
    options: { signal?: AbortSignal },
    callback: (lock: unknown) => Promise<T> | T,
  ): Promise<T> {
    if (this.holders.get(name)) {
      await new Promise<void>((resolve, reject) => {
        const queue = this.waiting.get(name) ?? [];
        this.waiting.set(name, queue);
        const grant = () => {
          options.signal?.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = () => {
          queue.splice(queue.indexOf(grant), 1);
          reject(new DOMException('The request was aborted', 'AbortError'));
        };
        if (options.signal?.aborted) return onAbort();
        options.signal?.addEventListener('abort', onAbort, { once: true });
        queue.push(grant);
      });
    }
    this.holders.set(name, true);
    try {
      return await callback({ name });
    } finally {
      const next = this.waiting.get(name)?.shift();
      if (next) next();
      else this.holders.set(name, false);
    }
  }
}

/** A WebSocket whose server side the test plays. */
export class FakeSocket implements WebSocketLike {
  readyState = 0;
  sent: Array<Record<string, unknown>> = [];
  closedByClient: { code?: number; reason?: string } | null = null;
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  constructor(readonly url: string) {}

  send(data: string): void {
    if (this.readyState !== 1) throw new Error('not open');
    this.sent.push(JSON.parse(data) as Record<string, unknown>);
  }
  close(code?: number, reason?: string): void {
    this.closedByClient = { code, reason };
    this.readyState = 3;
  }
  /** Server accepts: open, `connected`, then the history (none unless given; `null`: not sent). */
  accept(
    connected: Partial<Extract<ChatServerEvent, { type: 'connected' }>> = {},
    history: ChatMessage[] | null = [],
  ): void {
    this.readyState = 1;
    this.onopen?.({});
    this.emit({
      type: 'connected',
      connectionId: 'c1',
      userId: 'u1',
      role: 'member',
      instanceId: 'node-0',
      ...connected,
    });
    if (history) this.emit({ type: 'message_history', messages: history });
  }
  emit(event: ChatServerEvent): void {
    this.onmessage?.({ data: JSON.stringify(event) });
  }
  serverClose(code: number, reason = ''): void {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
  sentOf(type: string): Array<Record<string, unknown>> {
    return this.sent.filter((f) => f.type === type);
  }
}
