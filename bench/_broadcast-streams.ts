// The SSE side of bench/broadcast-async.ts, in a worker thread: it holds the open streams and timestamps each
// stream's first `new_notification` carrying the marker, so parsing 1,000+ streams never delays the main
// thread's polling and timing (the two share nothing but messages; times are absolute, timeOrigin + now()).
import { parentPort, workerData } from 'node:worker_threads';
import { openStream, type SseClient } from '@herald/server/testkit';

export interface StreamSpec {
  url: string;
  cookie: string;
}

export interface StreamsInit {
  streams: StreamSpec[];
  marker: string;
  concurrency: number;
}

export type ToWorker = { type: 'report' } | { type: 'close' };

export type FromWorker =
  | { type: 'ready'; connectedIds: string[]; openMs: number }
  | { type: 'failed'; error: string }
  | {
      type: 'report';
      /** Absolute ms of each stream's first marker event; NaN when none arrived. */
      receivedAt: number[];
      /** Marker events beyond the first, over all streams. */
      duplicates: number;
      /** Streams the server ended. */
      ended: number;
    };

const now = () => performance.timeOrigin + performance.now();
const port = parentPort;
if (!port) throw new Error('run as a worker thread');
const init = workerData as StreamsInit;

const clients: SseClient[] = new Array(init.streams.length);
const receivedAt: number[] = new Array(init.streams.length).fill(Number.NaN);
const isMarker = (e: { event: string; data: Record<string, unknown> }) =>
  e.event === 'new_notification' &&
  String((e.data.notification as { title?: string } | undefined)?.title ?? '').includes(init.marker);

async function main() {
  const start = now();
  let next = 0;
  const worker = async () => {
    while (next < init.streams.length) {
      const i = next++;
      const spec = init.streams[i];
      if (!spec) continue;
      const client = await openStream(spec.url, spec.cookie);
      if (client.status !== 200) throw new Error(`stream ${i}: HTTP ${client.status}`);
      await client.waitFor((e) => e.event === 'connected', 60_000);
      clients[i] = client;
      // One waiter per stream: resolves on the marker's first arrival (timestamped here, in this thread).
      client.waitFor(isMarker, 24 * 3_600_000).then(
        () => {
          receivedAt[i] = now();
        },
        () => {},
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(init.concurrency, init.streams.length) }, worker));
  port?.postMessage({
    type: 'ready',
    connectedIds: clients.map((c) => c.events.find((e) => e.event === 'connected')?.id ?? ''),
    openMs: now() - start,
  } satisfies FromWorker);
}

port.on('message', (msg: ToWorker) => {
  if (msg.type === 'report') {
    let duplicates = 0;
    let ended = 0;
    for (const c of clients) {
      const n = c.events.filter(isMarker).length;
      if (n > 1) duplicates += n - 1;
      if (c.isEnded()) ended++;
    }
    port.postMessage({ type: 'report', receivedAt, duplicates, ended } satisfies FromWorker);
  } else {
    for (const c of clients) c?.close();
    port.close();
  }
});

main().catch((err: unknown) => {
  port.postMessage({
    type: 'failed',
    error: err instanceof Error ? err.message : String(err),
  } satisfies FromWorker);
});
