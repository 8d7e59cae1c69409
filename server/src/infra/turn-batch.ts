// Owns sending the store commands asked for in one turn of the event loop as one command at the end of the turn
// (docs/architecture.md "Per second"; docs/performance.md "Reads of one turn as one MGET"): under load one read
// of the sockets brings many requests, each asking the store something small, and in ioredis a command of its own
// costs 12-15 µs of CPU beyond its reply. The rate-limit windows, the plain reads and the unread cache's hash
// reads go this way.

interface Pending<I, R> {
  item: I;
  resolve(value: R): void;
  reject(err: unknown): void;
}

export interface TurnBatch<I, R> {
  /** Queues the item; sent with the rest of this turn's items once the turn ends (setImmediate). */
  add(item: I): Promise<R>;
  /** Sends the item at once in a call of its own (a latency-critical path that must not wait for the turn). */
  now(item: I): Promise<R>;
}

/**
 * `send` answers a group of at most `max` items, one result per item in order; when it fails (or throws), every
 * item of that group fails with its error and the other groups are unaffected.
 */
export function createTurnBatch<I, R>(send: (group: I[]) => Promise<R[]>, max: number): TurnBatch<I, R> {
  let pending: Pending<I, R>[] = [];
  const sendGroup = (group: Pending<I, R>[]) => {
    let reply: Promise<R[]>;
    try {
      reply = send(group.map((p) => p.item));
    } catch (err) {
      reply = Promise.reject(err);
    }
    reply.then(
      (results) => {
        group.forEach((p, i) => {
          p.resolve(results[i] as R);
        });
      },
      (err: unknown) => {
        for (const p of group) p.reject(err);
      },
    );
  };
  const flush = () => {
    const taken = pending;
    pending = [];
    for (let i = 0; i < taken.length; i += max) sendGroup(taken.slice(i, i + max));
  };
  return {
    add(item) {
      return new Promise<R>((resolve, reject) => {
        if (pending.length === 0) setImmediate(flush);
        pending.push({ item, resolve, reject });
      });
    },
    now(item) {
      return new Promise<R>((resolve, reject) => {
        sendGroup([{ item, resolve, reject }]);
      });
    },
  };
}
