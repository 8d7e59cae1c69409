// Owns the Redis bus's subscriptions on its subscriber connection: the fixed channels, and the room channels
// this instance listens on only while it has a handler for the room (counted per channel). On a cluster each
// channel is SSUBSCRIBEd on its own (each may live on another shard). docs/architecture.md, "Redis Cluster".
import type { Logger } from '../../infra/logger.js';
import type { StoreClient } from '../../infra/store.js';

export interface BusChannelsDeps {
  sub: StoreClient;
  sharded: boolean;
  /** The fixed channels (control, chat, notifications). */
  fixed: readonly string[];
  logger: Logger;
  isDegraded(): boolean;
  isClosed(): boolean;
  /** A room subscribe failed: the probe finds the channel silent and recovery subscribes it again. */
  onSubscribeFailed(): void;
}

export function createBusChannels(deps: BusChannelsDeps) {
  const { sub, sharded, fixed } = deps;
  const subscribed = new Set(fixed);
  /** Room channels this instance listens on, with the number of local handlers of each. */
  const dynamic = new Map<string, number>();
  const joining = new Map<string, Promise<void>>();

  return {
    /** A message on a channel not listened on (any more) is ignored. */
    isSubscribed: (ch: string): boolean => subscribed.has(ch),
    /** Room channels listened on. */
    joined: (): string[] => [...dynamic.keys()],

    /**
     * Subscribes every channel (fixed and rooms). `first`: nothing was ever subscribed. On a cluster after that,
     * only `suspect` (channels whose probe failed; undefined: all) are repaired.
     */
    async subscribeAll(first: boolean, suspect: string[] | undefined): Promise<void> {
      if (!sharded) {
        await sub.subscribe(...fixed, ...dynamic.keys());
        return;
      }
      // One SSUBSCRIBE per channel: each may live on another shard (ioredis routes it to that shard's subscriber).
      if (first) {
        await Promise.all([...fixed, ...dynamic.keys()].map((ch) => sub.ssubscribe(ch)));
        return;
      }
      // ioredis re-subscribes by itself after a topology change; this only repairs channels still not carrying
      // our probe. SUNSUBSCRIBE first: ioredis appends every SSUBSCRIBE to the channel list it replays, and
      // SUNSUBSCRIBE removes every copy, so repeated repairs during a long outage do not grow that list.
      await Promise.all(
        (suspect ?? [...fixed, ...dynamic.keys()]).map(async (ch) => {
          await sub.sunsubscribe(ch).catch(() => {});
          await sub.ssubscribe(ch);
        }),
      );
    },

    /** One more handler of a room channel; resolves once the store confirmed the subscription (or failed to). */
    async join(ch: string): Promise<void> {
      const count = (dynamic.get(ch) ?? 0) + 1;
      dynamic.set(ch, count);
      subscribed.add(ch);
      if (count === 1 && !deps.isClosed()) {
        // While degraded the subscription is left to recovery (subscribeAll includes every room channel).
        const pending = deps.isDegraded()
          ? Promise.resolve()
          : (sharded ? sub.ssubscribe(ch) : sub.subscribe(ch)).then(
              () => {},
              (err: unknown) => {
                deps.logger.warn(
                  { err: err instanceof Error ? err.message : String(err) },
                  'room subscribe failed',
                );
                // Not left as it is: the probe finds the channel silent and recovery subscribes it again.
                deps.onSubscribeFailed();
              },
            );
        joining.set(ch, pending);
        void pending.finally(() => {
          if (joining.get(ch) === pending) joining.delete(ch);
        });
      }
      await joining.get(ch);
    },

    /** One handler fewer; the last one unsubscribes the channel. */
    leave(ch: string): void {
      const rest = (dynamic.get(ch) ?? 1) - 1;
      if (rest > 0) {
        dynamic.set(ch, rest);
        return;
      }
      dynamic.delete(ch);
      subscribed.delete(ch);
      if (deps.isClosed() || sub.status !== 'ready') return;
      // Commands on the subscriber connection run in order: a re-join right after queues behind this.
      void (sharded ? sub.sunsubscribe(ch) : sub.unsubscribe(ch)).catch(() => {});
    },

    /** Closing: the fixed channels are unsubscribed (best effort; the connection may be going away). */
    async unsubscribeFixed(): Promise<void> {
      if (sharded) await Promise.all(fixed.map((ch) => sub.sunsubscribe(ch).catch(() => {})));
      else await sub.unsubscribe(...fixed).catch(() => {});
    },
  };
}

export type BusChannels = ReturnType<typeof createBusChannels>;
