// Owns the Redis Cluster bus's end-to-end probe: a master can fail while every client stays "ready" (the others
// still answer), so the bus sends its own marker on its channels and waits for it to come back. The probe loop
// turns a shard that stopped carrying our messages into degraded mode, and recovery waits until every channel
// round-trips again (docs/architecture.md, "Redis Cluster").
import { randomUUID } from 'node:crypto';
import type { Logger } from '../../infra/logger.js';

/** Probe messages are not envelopes: receivers recognise them by this start and never parse or count them. */
const PROBE_MARK = '~probe:';

/** How often a degraded bus probes (and the first probe after start). */
export const PROBE_RETRY_MS = 500;
/** Room channels probed per round in steady state (in turn), on top of the fixed channels. */
const ROOM_PROBES_PER_ROUND = 16;
/** Rounds after a topology event that probe every joined room channel (at 5 s a round: ioredis' slots refresh). */
const JOINED_ROUNDS_AFTER_TOPOLOGY_EVENT = 4;
const PROBE_TIMEOUT_MS = 2_000;

export interface ShardProbeDeps {
  instanceId: string;
  logger: Logger;
  /** Only a sharded bus runs the loop; on one Redis the connection events tell the bus everything. */
  enabled: boolean;
  /** The fixed channels (control, chat, notifications): probed every round. */
  fixed: readonly string[];
  /** How often a healthy bus probes. */
  intervalMs: number;
  send(channel: string, raw: string): Promise<unknown>;
  /** Room channels this instance listens on. */
  joined(): string[];
  /** Still listened on: a room left while its probe was out (its marker cannot come back) is no outage. */
  isSubscribed(channel: string): boolean;
  isDegraded(): boolean;
  allReady(): boolean;
  /** The bus's recovery (resubscribe, re-probe); resolves when the attempt ended. */
  recover(): Promise<void> | undefined;
  /** Channels whose probe did not come back twice in a row while healthy: the bus degrades. */
  onSilent(failed: string[]): void;
}

export function createShardProbe(deps: ShardProbeDeps) {
  const pending = new Map<string, () => void>();
  /**
   * Probe rounds left that cover every joined room channel (set by `soon`: a topology event, a failed publish or
   * a failed room subscribe).
   */
  let joinedRounds = 0;
  /** Where the next round's share of room channels starts (steady state: a few per round, in turn). */
  let joinedCursor = 0;
  let timer: NodeJS.Timeout | undefined;
  let probing = false;
  let stopped = false;

  /** Publishes a probe on every channel of `list`; resolves with the channels whose probe did not come back. */
  const probe = async (list: readonly string[] = deps.fixed): Promise<string[]> => {
    const waits = list.map((ch) => {
      const nonce = randomUUID();
      const arrived = new Promise<boolean>((resolve) => {
        const t = setTimeout(() => {
          pending.delete(nonce);
          resolve(false);
        }, PROBE_TIMEOUT_MS);
        t.unref();
        pending.set(nonce, () => {
          clearTimeout(t);
          pending.delete(nonce);
          resolve(true);
        });
      });
      const sent = deps.send(ch, `${PROBE_MARK}${deps.instanceId}:${nonce}`).then(
        () => true,
        () => false,
      );
      return Promise.all([sent, arrived]).then(([a, b]) => a && b);
    });
    const results = await Promise.all(waits);
    const failed = list.filter((_, i) => !results[i]);
    if (failed.length > 0) {
      deps.logger.debug(
        { failed: failed.length, channels: deps.fixed.length },
        'bus probe: channels not round-tripping',
      );
    }
    return failed;
  };

  const joinedToProbe = (): string[] => {
    const joined = deps.joined();
    if (joinedRounds > 0) {
      joinedRounds--;
      return joined;
    }
    if (joined.length <= ROOM_PROBES_PER_ROUND) return joined;
    const start = joinedCursor % joined.length;
    joinedCursor = start + ROOM_PROBES_PER_ROUND;
    const slice = joined.slice(start, start + ROOM_PROBES_PER_ROUND);
    return slice.length < ROOM_PROBES_PER_ROUND
      ? [...slice, ...joined.slice(0, ROOM_PROBES_PER_ROUND - slice.length)]
      : slice;
  };

  const schedule = (ms: number) => {
    if (!deps.enabled || stopped) return;
    clearTimeout(timer);
    timer = setTimeout(run, ms);
    timer.unref();
  };

  const run = async () => {
    if (stopped || probing) return;
    probing = true;
    try {
      if (deps.isDegraded()) {
        if (deps.allReady()) await deps.recover();
      } else {
        // Room channels are probed too: ioredis re-subscribes sharded channels by itself after a topology change
        // (at once, or at its next slots refresh, seconds later), and when one goes astray nothing else notices: no
        // traffic of ours crosses it, the room just goes silent on this instance. All of them for the rounds
        // following a topology event; otherwise a few per round in turn, since with thousands of rooms joined
        // probing every one each round would cost more than the rooms' own traffic.
        const list = [...deps.fixed, ...joinedToProbe()];
        // A miss is confirmed once before degrading: one slow round trip on a starved event loop is not an outage.
        const stillWanted = (chs: string[]) => chs.filter((ch) => deps.isSubscribed(ch));
        let failed = stillWanted(await probe(list));
        if (failed.length > 0) failed = stillWanted(await probe(failed));
        if (failed.length > 0 && !deps.isDegraded()) deps.onSilent(failed);
      }
    } finally {
      probing = false;
      schedule(deps.isDegraded() ? PROBE_RETRY_MS : deps.intervalMs);
    }
  };

  return {
    probe,
    /** True when `raw` is a probe marker (never an envelope); our own coming back ends its wait. */
    receive(raw: string): boolean {
      if (!raw.startsWith(PROBE_MARK)) return false;
      const [from, nonce] = raw.slice(PROBE_MARK.length).split(':');
      if (from === deps.instanceId && nonce) pending.get(nonce)?.();
      return true;
    },
    /** Runs the next round in `ms` (replacing a round already scheduled). */
    schedule,
    /** Something may have moved (topology event, failed publish or room subscribe): every room, now. */
    soon(): void {
      joinedRounds = JOINED_ROUNDS_AFTER_TOPOLOGY_EVENT;
      if (!deps.isDegraded()) schedule(0);
    },
    stop(): void {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

export type ShardProbe = ReturnType<typeof createShardProbe>;
