// A real SSE client over loopback (node:http), parsing the event stream incrementally.
import http from 'node:http';

export interface SseEvent {
  id: string | undefined;
  event: string;
  data: Record<string, unknown>;
}

export interface SseClient {
  status: number;
  headers: http.IncomingHttpHeaders;
  events: SseEvent[];
  /** Resolves with the first received (or future) event at index ≥ `from` matching the predicate. */
  waitFor(predicate: (e: SseEvent) => boolean, timeoutMs?: number, from?: number): Promise<SseEvent>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  isEnded(): boolean;
  /** Raw text received (for framing assertions). */
  raw(): string;
  pause(): void;
  close(): void;
}

export function parseFrame(frame: string): SseEvent | null {
  let id: string | undefined;
  let event = 'message';
  const data: string[] = [];
  for (const line of frame.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
    if (field === 'id') id = value;
    else if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return null;
  return { id, event, data: JSON.parse(data.join('\n')) as Record<string, unknown> };
}

export function openStream(
  baseUrl: string,
  cookie: string | undefined,
  opts: { lastEventId?: string; path?: string } = {},
): Promise<SseClient> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (cookie) headers.cookie = cookie;
    if (opts.lastEventId !== undefined) headers['last-event-id'] = opts.lastEventId;
    const req = http.get(
      `${baseUrl}${opts.path ?? '/notification/stream'}`,
      { headers, agent: false },
      (res) => {
        const events: SseEvent[] = [];
        const waiters: Array<{
          predicate: (e: SseEvent) => boolean;
          from: number;
          resolve: (e: SseEvent) => void;
        }> = [];
        let buffer = '';
        let rawText = '';
        let ended = false;
        let endResolve: () => void = () => {};
        const endedPromise = new Promise<void>((r) => {
          endResolve = r;
        });
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          rawText += chunk;
          buffer += chunk;
          let idx = buffer.indexOf('\n\n');
          while (idx >= 0) {
            const frame = buffer.slice(0, idx);
            buffer = buffer.slice(idx + 2);
            const ev = parseFrame(frame);
            if (ev) {
              events.push(ev);
              const index = events.length - 1;
              for (const w of [...waiters]) {
                if (index >= w.from && w.predicate(ev)) {
                  waiters.splice(waiters.indexOf(w), 1);
                  w.resolve(ev);
                }
              }
            }
            idx = buffer.indexOf('\n\n');
          }
        });
        const finish = () => {
          ended = true;
          endResolve();
        };
        res.on('end', finish);
        res.on('close', finish);
        res.on('error', finish);
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          events,
          ended: endedPromise,
          isEnded: () => ended,
          raw: () => rawText,
          waitFor(predicate, timeoutMs = 10_000, from = 0) {
            const found = events.find((e, i) => i >= from && predicate(e));
            if (found) return Promise.resolve(found);
            return new Promise((res2, rej) => {
              const w = { predicate, from, resolve: res2 };
              waiters.push(w);
              setTimeout(() => {
                const i = waiters.indexOf(w);
                if (i >= 0) {
                  waiters.splice(i, 1);
                  rej(
                    new Error(
                      `timed out waiting for an SSE event; got ${events.map((e) => e.event).join(',')}`,
                    ),
                  );
                }
              }, timeoutMs).unref();
            });
          },
          pause: () => res.pause(),
          close: () => {
            req.destroy();
          },
        });
      },
    );
    req.on('error', reject);
  });
}

export async function listenUrl(app: { listen(o: { port: number; host: string }): Promise<string> }) {
  return app.listen({ port: 0, host: '127.0.0.1' });
}
