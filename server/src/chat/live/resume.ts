// A socket joins a room's live stream: the subscription is registered first (changes for it are held), then the
// room's head is read, `subscribed` and the replay since the client's position are sent, then the held changes
// above the replay, each once. The §6 greeting does the same for `general` with `message_history`.
import type { ChatConnection, ChatHub } from '../hub.js';
import { ChatLimits, encode, GENERAL_ROOM_ID, legacyMessage } from '../protocol.js';
import type { ChatRepository, ReplayEvent } from '../repository.js';
import type { Delivery } from './delivery.js';
import { changeFromReplay, v2Frame } from './frames.js';
import type { SubscriptionRegistry } from './registry.js';
import type { Pipe, RoomLive, RoomLiveDeps, Sub } from './types.js';

export interface ResumeDeps {
  hub: ChatHub;
  repo: ChatRepository;
  registry: SubscriptionRegistry;
  delivery: Delivery;
  generalSnapshot: RoomLiveDeps['generalSnapshot'];
  presence?: RoomLiveDeps['presence'];
}

export type Resume = Pick<RoomLive, 'subscribe' | 'attachGeneral'>;

export function createResume(deps: ResumeDeps): Resume {
  const { hub, repo, registry, delivery } = deps;
  const { pipes, aware } = registry;
  const { sendChange } = delivery;

  /**
   * Ends the replay phase of a subscription: whatever the pipe delivered meanwhile, in order, each once; a
   * revision missing between the replay and the first held change (the pipe had delivered it just before this
   * socket registered) is read from PostgreSQL.
   */
  const goLive = async (conn: ChatConnection, pipe: Pipe, sub: Sub, now: boolean) => {
    for (let round = 0; round < 3; round++) {
      const held = sub.buffer ?? [];
      sub.buffer = [];
      held.sort((x, y) => x.rev - y.rev);
      const first = held[0];
      const upTo = first ? first.rev - 1 : (pipe.lastRev ?? sub.rev);
      if (upTo > sub.rev) {
        const missing = await repo.changes(pipe.roomId, sub.rev, upTo, ChatLimits.MAX_REPLAY);
        for (const e of missing) sendChange(conn, pipe.roomId, sub, changeFromReplay(e), now);
      }
      for (const c of held) sendChange(conn, pipe.roomId, sub, c, now);
      if (sub.buffer.length === 0) break;
    }
    const rest = sub.buffer ?? [];
    sub.buffer = null;
    for (const c of rest) sendChange(conn, pipe.roomId, sub, c, now);
  };

  return {
    async subscribe(conn, roomId, options) {
      aware.add(conn);
      const pipe = await registry.ensurePipe(roomId, options.kind);
      if (conn.ws.readyState !== conn.ws.OPEN) {
        if (pipe.subs.size === 0 && roomId !== GENERAL_ROOM_ID) registry.release(pipe);
        return;
      }
      const sub: Sub = { rev: 0, buffer: [], legacy: false, canWrite: options.canWrite };
      registry.register(pipe, conn, sub);
      try {
        const head = await repo.head(roomId);
        if (!head) {
          registry.drop(pipe, conn);
          return;
        }
        delivery.initPipe(pipe, head);
        let since = head.lastRev;
        let resync = false;
        if (options.sinceRev !== undefined) since = options.sinceRev;
        else if (options.sinceSeq !== undefined) {
          since =
            options.sinceSeq > head.lastSeq
              ? head.lastRev + 1
              : await repo.revAtSeq(roomId, options.sinceSeq);
        }
        let replay: ReplayEvent[] = [];
        if (since > head.lastRev) resync = true;
        else if (since < head.lastRev) {
          replay = await repo.changes(roomId, since, head.lastRev, ChatLimits.MAX_REPLAY + 1);
          if (replay.length > ChatLimits.MAX_REPLAY) {
            resync = true;
            replay = [];
          }
        }
        const frames: Buffer[] = [];
        for (const e of replay) {
          const frame = v2Frame(roomId, changeFromReplay(e));
          if (frame) frames.push(frame);
        }
        hub.send(
          conn,
          encode({
            type: 'subscribed',
            roomId,
            lastSeq: head.lastSeq,
            rev: head.lastRev,
            replayed: frames.length,
            resync,
          }),
        );
        for (const frame of frames) hub.send(conn, frame);
        sub.rev = head.lastRev;
        await goLive(conn, pipe, sub, false);
        const presence = await deps.presence?.snapshot(roomId).catch(() => null);
        if (presence && pipe.subs.get(conn) === sub) hub.send(conn, presence);
      } catch (err) {
        registry.drop(pipe, conn);
        throw err;
      }
    },

    async attachGeneral(conn, legacy) {
      if (!legacy) aware.add(conn);
      const pipe = pipes.get(GENERAL_ROOM_ID) as Pipe;
      const sub: Sub = { rev: 0, buffer: [], legacy, canWrite: conn.identity !== null };
      registry.register(pipe, conn, sub);
      let snapshot: Awaited<ReturnType<RoomLiveDeps['generalSnapshot']>>;
      try {
        snapshot = await deps.generalSnapshot();
      } catch (err) {
        // No history: the socket still goes live (from whatever arrives next) instead of holding frames forever.
        const held = sub.buffer ?? [];
        sub.buffer = null;
        sub.rev = held[0] ? held[0].rev - 1 : (pipe.lastRev ?? 0);
        for (const c of held) sendChange(conn, GENERAL_ROOM_ID, sub, c, true);
        throw err;
      }
      delivery.initPipe(pipe, snapshot.head);
      const { messages, head } = snapshot;
      hub.sendNow(
        conn,
        encode(
          legacy
            ? { type: 'message_history', messages: messages.map(legacyMessage) }
            : {
                type: 'message_history',
                roomId: GENERAL_ROOM_ID,
                messages,
                lastSeq: head.lastSeq,
                rev: head.lastRev,
              },
        ),
      );
      sub.rev = head.lastRev;
      await goLive(conn, pipe, sub, true);
    },
  };
}
