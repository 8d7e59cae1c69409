// Concurrent list pages share statements (issue 27 target 2). An uncached page is one statement, and on a busy
// instance most of what it costs both Herald and PostgreSQL is the statement itself (a socket write and read on
// each side, the protocol messages, the executor's start), not the 20 rows: with 100 readers over 100 users, a
// statement per page cost 292–344 µs of Node CPU and 473–490 µs of PostgreSQL CPU per page, one statement for each
// group of pages waiting together 179–197 µs and 285–304 µs (bench/list-statements.ts, docs/performance.md).
//
// So pages wait in a queue per executor (the primary, or a replica) and shape (the statement's text: filter, type
// or not, deep or not, counted or rows only), and go out together: at most `maxInFlight` statements per executor
// run at a time; while they run, new pages queue, and each statement that ends sends what has queued meanwhile.
// An idle instance sends a page at once (the next turn of the event loop), alone, as before.
//
// Freshness: a page joins only a statement that has not been sent yet, so every answer was read after its request
// arrived, as if it had its own statement; a write that committed before the request is in it. Two requests for
// the same page of the same user queued together are read once (the same rows answer both).

/** One page of one user's list: what a statement is asked for. */
export interface PageKey {
  userId: string;
  type: string | null;
  offset: number;
  limit: number;
}

export interface PageResult<R> {
  rows: R[];
  totalCount: number;
}

export interface PageBatcherOptions<E, R> {
  /** Statements of one executor running at a time; pages wait while this many run. */
  maxInFlight: number;
  /** Pages per statement at most (distinct ones; equal requests share). */
  maxBatch: number;
  /** One page (a statement of its own, the one a page always ran). */
  one(via: E, shape: string, key: PageKey): Promise<PageResult<R>>;
  /** Several distinct pages of one shape in one statement; the results in the keys' order. */
  many(via: E, shape: string, keys: PageKey[]): Promise<PageResult<R>[]>;
}

interface Waiter<R> {
  resolve(result: PageResult<R>): void;
  reject(err: unknown): void;
}

/** Page id → the page and the requests waiting for it. */
type Queue<R> = Map<string, { key: PageKey; waiters: Waiter<R>[] }>;

interface Lane<R> {
  inFlight: number;
  scheduled: boolean;
  /** Shape → its queue (insertion order: oldest shape first). */
  queues: Map<string, Queue<R>>;
}

const pageId = (k: PageKey) => `${k.userId}\u0000${k.type ?? ''}\u0000${k.offset}\u0000${k.limit}`;

export interface PageBatcher<E, R> {
  page(via: E, shape: string, key: PageKey): Promise<PageResult<R>>;
}

export function createPageBatcher<E extends object, R>(opts: PageBatcherOptions<E, R>): PageBatcher<E, R> {
  const lanes = new WeakMap<E, Lane<R>>();

  const run = (via: E, lane: Lane<R>, shape: string, group: Queue<R>) => {
    const entries = [...group.values()];
    lane.inFlight++;
    const settle = (results: PageResult<R>[] | null, err?: unknown) => {
      lane.inFlight--;
      entries.forEach((e, i) => {
        const result = results?.[i];
        for (const w of e.waiters) {
          if (result) w.resolve(result);
          else w.reject(err ?? new Error('page batch answered fewer pages than it was asked for'));
        }
      });
      send(via, lane);
    };
    const only = entries.length === 1 ? entries[0] : undefined;
    const statement = only
      ? opts.one(via, shape, only.key).then((r) => [r])
      : opts.many(
          via,
          shape,
          entries.map((e) => e.key),
        );
    statement.then(
      (results) => settle(results),
      (err: unknown) => settle(null, err),
    );
  };

  /** Sends queued pages while statements are free, one shape per statement, the oldest shape first. */
  const send = (via: E, lane: Lane<R>) => {
    while (lane.inFlight < opts.maxInFlight && lane.queues.size > 0) {
      const [shape, queue] = lane.queues.entries().next().value as [string, Queue<R>];
      let group = queue;
      if (queue.size > opts.maxBatch) {
        group = new Map();
        for (const [id, entry] of queue) {
          if (group.size === opts.maxBatch) break;
          group.set(id, entry);
          queue.delete(id);
        }
      } else {
        lane.queues.delete(shape);
      }
      run(via, lane, shape, group);
    }
  };

  return {
    page(via, shape, key) {
      let lane = lanes.get(via);
      if (!lane) {
        lane = { inFlight: 0, scheduled: false, queues: new Map() };
        lanes.set(via, lane);
      }
      const current = lane;
      return new Promise<PageResult<R>>((resolve, reject) => {
        let queue = current.queues.get(shape);
        if (!queue) {
          queue = new Map();
          current.queues.set(shape, queue);
        }
        const id = pageId(key);
        const entry = queue.get(id);
        if (entry) entry.waiters.push({ resolve, reject });
        else queue.set(id, { key, waiters: [{ resolve, reject }] });
        // Pages that arrive in the same turn of the event loop (one read of many sockets) go out together.
        if (!current.scheduled && current.inFlight < opts.maxInFlight) {
          current.scheduled = true;
          setImmediate(() => {
            current.scheduled = false;
            send(via, current);
          });
        }
      });
    },
  };
}
