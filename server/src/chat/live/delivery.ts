// The ordered, exactly-once delivery of a room's changes to this instance's subscribers: per pipe, a change with
// the next revision is delivered, an early one is held and the missing ones are read from PostgreSQL (gap
// filling); a change stored under a newer members version re-checks the subscribers of a private or direct room
// first.
import type { Logger } from '../../infra/logger.js';
import type { ChatConnection, ChatHub } from '../hub.js';
import { type ChatBusEvent, ChatLimits, encode, GENERAL_ROOM_ID, type RoomChange } from '../protocol.js';
import type { ChatRepository, RoomHead } from '../repository.js';
import { changeFromEvent, changeFromReplay, frameFor } from './frames.js';
import type { SubscriptionRegistry } from './registry.js';
import type { Change, Pipe, Sub } from './types.js';

const FILL_RETRY_MS = 500;
/**
 * How long a gap among bus arrivals may last before it is read from PostgreSQL: concurrent senders' messages
 * often arrive a moment out of order (their publishes race), and the missing one is usually already on its way.
 */
const GAP_WAIT_MS = 50;
const MAX_FILL_FAILURES = 5;

export interface DeliveryDeps {
  hub: ChatHub;
  repo: ChatRepository;
  registry: SubscriptionRegistry;
  membersAmong(roomId: string, userIds: string[]): Promise<Set<string>>;
  onGeneralChange(): void;
  logger: Logger;
}

export interface Delivery {
  /** Sends one change to one subscriber unless it already has it (`now`: without waiting for the fan-out turn). */
  sendChange(conn: ChatConnection, roomId: string, sub: Sub, c: Change, now: boolean): void;
  /** Starts the pipe at the head a subscriber read, when nothing had started it yet. */
  initPipe(pipe: Pipe, head: RoomHead): void;
  /** A room change or `sync` from the bus. */
  change(event: RoomChange | Extract<ChatBusEvent, { type: 'sync' }>): void;
  /** The bus recovered: every pipe reads its room's head and catches up. */
  catchUp(): void;
}

export function createDelivery(deps: DeliveryDeps): Delivery {
  const { hub, repo, registry, logger } = deps;
  const { pipes } = registry;

  const sendChange = (conn: ChatConnection, roomId: string, sub: Sub, c: Change, now: boolean) => {
    if (c.rev <= sub.rev) return;
    sub.rev = c.rev;
    const frame = frameFor(roomId, sub, c);
    if (!frame) return;
    if (now) hub.sendNow(conn, frame);
    else hub.push(conn, frame);
  };

  const deliver = (pipe: Pipe, c: Change) => {
    if (pipe.roomId === GENERAL_ROOM_ID) deps.onGeneralChange();
    for (const [conn, sub] of pipe.subs) {
      if (sub.buffer) sub.buffer.push(c);
      else sendChange(conn, pipe.roomId, sub, c, false);
    }
  };

  /** A private or direct room lost a member since the subscribers were checked: check them before delivering. */
  const recheckMembers = async (pipe: Pipe, version: number) => {
    const users = [...pipe.users.keys()];
    const members = await deps.membersAmong(pipe.roomId, users);
    for (const [conn, sub] of [...pipe.subs]) {
      const userId = conn.identity?.userId;
      if (!userId || members.has(userId) || conn.identity?.isAdmin) continue;
      void sub;
      registry.drop(pipe, conn);
      hub.send(conn, encode({ type: 'unsubscribed', roomId: pipe.roomId, reason: 'removed' }));
    }
    pipe.membersVersion = Math.max(pipe.membersVersion, version);
  };

  /** Delivers what can be delivered in order; fills gaps from PostgreSQL. One run per pipe at a time. */
  const pump = async (pipe: Pipe): Promise<void> => {
    if (pipe.busy) return;
    pipe.busy = true;
    try {
      for (;;) {
        if (pipe.lastRev === null) return;
        const next = pipe.pending.get(pipe.lastRev + 1);
        if (next) {
          if (
            next.mv > pipe.membersVersion &&
            (pipe.kind === 'private' || pipe.kind === 'direct') &&
            pipe.subs.size > 0
          ) {
            await recheckMembers(pipe, next.mv);
          }
          pipe.pending.delete(next.rev);
          pipe.lastRev = next.rev;
          pipe.gapSince = 0;
          deliver(pipe, next);
          continue;
        }
        let target = pipe.want;
        for (const rev of pipe.pending.keys()) target = Math.max(target, rev);
        if (target <= pipe.lastRev) {
          pipe.pending.clear();
          pipe.gapSince = 0;
          return;
        }
        if (pipe.want <= pipe.lastRev) {
          // Only bus arrivals say there is a gap: give the missing ones a moment before reading them.
          const now = Date.now();
          if (pipe.gapSince === 0) {
            pipe.gapSince = now;
            setTimeout(() => kick(pipe), GAP_WAIT_MS).unref();
            return;
          }
          if (now - pipe.gapSince < GAP_WAIT_MS) return;
        }
        pipe.gapSince = 0;
        // A gap: the changes exist in PostgreSQL (a change is published after its commit, and a later one
        // commits after it under the room's lock); read them instead of waiting for a bus message that may
        // never come.
        try {
          const changes = await repo.changes(pipe.roomId, pipe.lastRev, target, ChatLimits.MAX_REPLAY);
          pipe.failures = 0;
          for (const e of changes) if (!pipe.pending.has(e.rev)) pipe.pending.set(e.rev, changeFromReplay(e));
          if (!pipe.pending.has(pipe.lastRev + 1)) {
            // Not there (a race with a purge's renumbering is impossible; a foreign writer is not): skip on.
            const first = Math.min(...pipe.pending.keys(), target + 1);
            pipe.lastRev = first - 1;
          }
        } catch (err) {
          pipe.failures++;
          logger.warn({ err, roomId: pipe.roomId }, 'chat: filling a gap failed');
          if (pipe.failures >= MAX_FILL_FAILURES) {
            // PostgreSQL stays away: deliver what is here; clients see the seq gap and resume on their own.
            const first = Math.min(...pipe.pending.keys(), target + 1);
            pipe.lastRev = first - 1;
            pipe.failures = 0;
            continue;
          }
          setTimeout(() => void pump(pipe), FILL_RETRY_MS).unref();
          return;
        }
      }
    } finally {
      pipe.busy = false;
    }
  };
  const kick = (pipe: Pipe) => {
    pump(pipe).catch((err: unknown) => logger.error({ err, roomId: pipe.roomId }, 'chat: room pipe failed'));
  };

  return {
    sendChange,

    initPipe(pipe, head) {
      if (pipe.lastRev === null) {
        pipe.lastRev = head.lastRev;
        pipe.membersVersion = head.membersVersion;
        for (const rev of [...pipe.pending.keys()]) if (rev <= head.lastRev) pipe.pending.delete(rev);
      }
      if (head.lastRev > pipe.want) pipe.want = head.lastRev;
      kick(pipe);
    },

    change(event) {
      const pipe = pipes.get(event.roomId);
      if (!pipe) return;
      if (event.type === 'sync') {
        if (event.rev > pipe.want) pipe.want = event.rev;
        kick(pipe);
        return;
      }
      if (pipe.lastRev === null) {
        // Not started yet (its first subscriber is reading the head): hold it, unless nobody will ever read it.
        if (pipe.subs.size === 0) return;
      } else if (event.rev <= pipe.lastRev) return;
      const c = changeFromEvent(event);
      pipe.pending.set(c.rev, c);
      kick(pipe);
    },

    catchUp() {
      for (const pipe of pipes.values()) {
        if (pipe.lastRev === null) continue;
        repo
          .head(pipe.roomId)
          .then((head) => {
            if (!head) return;
            if (head.lastRev > pipe.want) pipe.want = head.lastRev;
            kick(pipe);
          })
          .catch((err: unknown) => logger.warn({ err, roomId: pipe.roomId }, 'chat: catch-up failed'));
      }
    },
  };
}
