// Owns the hardened Server-Sent Events writer: response headers, CR/LF-safe framing, `id:` lines, a bound on
// the bytes buffered for a slow client, and exactly-once cleanup when the connection ends for any reason.
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

const LINE_BREAK = /\r\n|\r|\n/;

/** Field values (id, event name) must not contain line breaks: a stray CR or LF would start a new field. */
function singleLine(value: string): string {
  return value.replace(/[\r\n\0]/g, '');
}

/**
 * The part of an event after its `id:` line. Serialised once per event and shared by every stream that
 * receives it; only the short id line can differ between streams.
 */
export function sseBody(event: string, data: unknown): string {
  const text = typeof data === 'string' ? data : JSON.stringify(data);
  let out = `event: ${singleLine(event)}\n`;
  // JSON.stringify escapes CR/LF inside strings; splitting still guards raw string payloads.
  for (const line of text.split(LINE_BREAK)) out += `data: ${line}\n`;
  return `${out}\n`;
}

export function sseIdLine(id: string | number): string {
  return `id: ${singleLine(String(id))}\n`;
}

/** One complete event frame. */
export function sseFrame(id: string | number, event: string, data: unknown): string {
  return sseIdLine(id) + sseBody(event, data);
}

export interface SseConnection {
  readonly closed: boolean;
  /** Bytes queued in user space for this client (not yet handed to the kernel). */
  bufferedBytes(): number;
  /**
   * Writes a chunk. Returns false when the connection is (or just became) closed — including when the client
   * is too slow and its buffer grew beyond the bound, in which case the connection is destroyed.
   */
  write(chunk: string): boolean;
  /** Writes an optional final chunk, then ends the response. */
  end(finalChunk?: string): void;
  /** Runs once when the connection ends (client abort, end(), overflow, server close). */
  onClose(handler: () => void): void;
}

export interface OpenSseOptions {
  /** Extra headers to send (e.g. those CORS and helmet already put on the reply). */
  headers?: OutgoingHttpHeaders;
  /** A client whose unsent bytes exceed this is dropped instead of growing memory without limit. */
  maxBufferedBytes: number;
  /** Reconnection delay suggested to EventSource clients, ms. */
  retryMs?: number;
}

const HOP_BY_HOP = new Set(['content-length', 'transfer-encoding', 'content-encoding', 'connection']);

/**
 * A stream holds its request and response objects for hours, so what they keep matters (measured with
 * `npm run bench -- memory`, docs/performance.md "Idle SSE memory"; a heap snapshot diff per stream showed these
 * as the largest avoidable parts):
 * - Node keeps the headers it sent in a null-prototype dictionary (`kOutHeaders`, ~830 B with 18 headers) for
 *   `getHeader`, which nothing calls once the head is out: it is dropped.
 * - The request's parsed headers (a dictionary, larger still once a key is deleted) and `rawHeaders` (the Cookie
 *   header among them: a session cookie plus whatever else the site sets, often kilobytes) are not needed once
 *   the session was checked and the head written: both are replaced, keeping only the headers the access log
 *   reads.
 * - The response head itself (`_header`) is dropped once it went out: see dropSentHead.
 */
function compactHeadState(raw: ServerResponse): void {
  const res = raw as ServerResponse & Record<symbol, unknown>;
  const outHeaders = Object.getOwnPropertySymbols(res).find((s) => s.description === 'kOutHeaders');
  if (outHeaders !== undefined) res[outHeaders] = null;
  const req = raw.req;
  // Kept: what the access-log line at the stream's end reads (the host, and the client address behind a trusted
  // proxy).
  const h = req.headers;
  req.headers = {
    host: h.host,
    'x-forwarded-for': h['x-forwarded-for'],
    'x-forwarded-host': h['x-forwarded-host'],
    'x-forwarded-proto': h['x-forwarded-proto'],
  };
  req.rawHeaders = [];
}

/**
 * What an open stream's response keeps as its head once the head was sent: one string shared by every stream.
 * Node reads `_header` after the head went out only for its truth (`headersSent`, and the "headers already
 * sent" checks of writeHead/setHeader/end); the bytes themselves are used once, by the write that sends them.
 */
const SENT_HEAD = 'HTTP/1.1 200 OK\r\n\r\n';

/**
 * Node keeps the response head it sent (`_header`, ~730 B per stream with helmet's headers, after flattening)
 * for as long as the response lives: hours for a stream. Once the first write has sent it (`_headerSent`), it
 * is replaced with the shared SENT_HEAD, which keeps every check that reads it truthy. `_header` and
 * `_headerSent` are Node internals: when they are not the plain own properties this expects (another Node, an
 * HTTP/2 compatibility response whose `_header` is a getter), the head is only flattened, as before: a tree of
 * ~80 concatenated strings (~2.5 KiB) becomes one copy of the same bytes (~730 B).
 */
function dropSentHead(raw: ServerResponse): boolean {
  const res = raw as ServerResponse & { _header?: unknown; _headerSent?: unknown };
  if (!Object.hasOwn(res, '_header') || typeof res._header !== 'string' || res._header === SENT_HEAD)
    return true;
  if (res._headerSent === true) {
    res._header = SENT_HEAD;
    return true;
  }
  // Not marked as sent yet (seen once in CI, cause not found): flattened for now, dropped at a later write.
  res._header = Buffer.from(res._header, 'latin1').toString('latin1');
  return false;
}

/**
 * One open stream. A class rather than an object of closures: thousands of streams share the methods, and each
 * keeps only the response, the bound and its cleanup handlers (see compactHeadState for the rest).
 */
class RawSseConnection implements SseConnection {
  #closed = false;
  /**
   * The cleanup handlers: a stream normally has one (the hub's registry), kept as the function itself. An array
   * only from the second on, copied at its exact length: a pushed-to array reserves 17 slots (~180 B per
   * stream, held for hours).
   */
  #handlers: (() => void) | ReadonlyArray<() => void> | null = null;
  readonly #raw: ServerResponse;
  readonly #maxBufferedBytes: number;
  /** Until the sent head is replaced by the shared marker (dropSentHead), each write tries again. */
  #headToDrop = true;

  constructor(raw: ServerResponse, maxBufferedBytes: number) {
    this.#raw = raw;
    this.#maxBufferedBytes = maxBufferedBytes;
    // One listener function per stream for both events: `finish` runs the handlers exactly once.
    const finish = () => this.#finish();
    raw.on('close', finish);
    raw.on('error', finish);
    // Gone before it opened: the socket was destroyed while the route was still awaiting (a parse error on a
    // byte after the request, a client that left during authentication). Its 'close' has been emitted already,
    // so without this the stream would count as open (its user's slot and presence) until a restart.
    const socket = raw.socket;
    if (raw.destroyed || socket === null || socket.destroyed) this.#closed = true;
  }

  get closed(): boolean {
    return this.#closed;
  }

  bufferedBytes(): number {
    return this.#raw.writableLength;
  }

  write(chunk: string): boolean {
    const raw = this.#raw;
    if (this.#closed || raw.destroyed || raw.writableEnded) return false;
    raw.write(chunk);
    if (this.#headToDrop) this.#headToDrop = !dropSentHead(raw);
    if (raw.writableLength > this.#maxBufferedBytes) {
      // Slow consumer: drop it; EventSource reconnects and resumes from its Last-Event-ID.
      raw.destroy();
      this.#finish();
      return false;
    }
    return true;
  }

  end(finalChunk?: string): void {
    const raw = this.#raw;
    if (this.#closed || raw.writableEnded) return;
    if (finalChunk !== undefined && !raw.destroyed) raw.write(finalChunk);
    raw.end();
  }

  onClose(handler: () => void): void {
    if (this.#closed) {
      handler();
      return;
    }
    const h = this.#handlers;
    this.#handlers = h === null ? handler : typeof h === 'function' ? [h, handler] : [...h, handler];
  }

  #finish(): void {
    if (this.#closed) return;
    this.#closed = true;
    const h = this.#handlers;
    this.#handlers = null;
    const handlers = h === null ? [] : typeof h === 'function' ? [h] : h;
    for (const handler of handlers) {
      try {
        handler();
      } catch {
        // A cleanup handler failing must not prevent the others from running.
      }
    }
  }
}

/** Writes the SSE response head on a raw response the caller has taken over (Fastify `reply.hijack()`). */
export function openSse(raw: ServerResponse, options: OpenSseOptions): SseConnection {
  const headers: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(options.headers ?? {})) {
    if (v !== undefined && !HOP_BY_HOP.has(k.toLowerCase())) headers[k.toLowerCase()] = v;
  }
  headers['content-type'] = 'text/event-stream; charset=utf-8';
  headers['cache-control'] = 'no-cache, no-transform';
  headers['x-accel-buffering'] = 'no';
  if (raw.req.httpVersionMajor < 2) headers.connection = 'keep-alive';
  raw.writeHead(200, headers);
  compactHeadState(raw);
  const socket = raw.socket;
  // A stream lives for hours: no idle timeout, and small frames go out at once.
  socket?.setTimeout(0);
  socket?.setNoDelay(true);
  socket?.setKeepAlive(true);
  const conn = new RawSseConnection(raw, options.maxBufferedBytes);
  // A comment line first: some proxies hold the head until the first body bytes arrive.
  // The first write sends the head, which the connection then drops (dropSentHead).
  conn.write(`retry: ${options.retryMs ?? 3000}\n: stream open\n\n`);
  return conn;
}
