// Owns this instance's live state of rooms (docs/design/chat.md, "Chat rooms: order, resume and fan-out"), one
// module per seam (live/): who follows which room here, with the presence hooks (registry.ts); per room a pipe
// that delivers the room's changes to local subscribers exactly once and in revision order, holding early
// arrivals, filling gaps from PostgreSQL and re-checking subscribers when the room lost a member (delivery.ts);
// and a socket's resume, `subscribed` + replay before any live frame (resume.ts). This module combines them into
// the one handle the feature passes around and answers the small questions about a socket's subscriptions.

import { createDelivery } from './live/delivery.js';
import { createSubscriptionRegistry } from './live/registry.js';
import { createResume } from './live/resume.js';
import type { RoomLive, RoomLiveDeps } from './live/types.js';
import { encode, GENERAL_ROOM_ID } from './protocol.js';

export type { RoomLive, RoomLiveDeps, RoomPresenceHooks, SubscribeOptions } from './live/types.js';

export function createRoomLive(deps: RoomLiveDeps): RoomLive {
  const { hub, repo, logger } = deps;
  const registry = createSubscriptionRegistry({
    bus: deps.bus,
    onBusEvent: (payload) => deps.onBusEvent(payload),
    presence: deps.presence,
  });
  const { pipes, bySocket, aware } = registry;
  const delivery = createDelivery({
    hub,
    repo,
    registry,
    membersAmong: (roomId, userIds) => deps.membersAmong(roomId, userIds),
    onGeneralChange: () => deps.onGeneralChange(),
    logger,
  });
  const resume = createResume({
    hub,
    repo,
    registry,
    delivery,
    generalSnapshot: () => deps.generalSnapshot(),
    presence: deps.presence,
  });

  return {
    subscribe: resume.subscribe,
    attachGeneral: resume.attachGeneral,

    unsubscribe(conn, roomId, reason) {
      const pipe = pipes.get(roomId);
      if (!pipe || !registry.drop(pipe, conn)) return false;
      hub.send(conn, encode({ type: 'unsubscribed', roomId, reason }));
      return true;
    },

    detach(conn) {
      const mine = bySocket.get(conn);
      if (!mine) return;
      for (const roomId of [...mine.keys()]) {
        const pipe = pipes.get(roomId);
        if (pipe) registry.drop(pipe, conn);
      }
      bySocket.delete(conn);
    },

    subscription: (conn, roomId) => bySocket.get(conn)?.get(roomId),
    count: (conn) => bySocket.get(conn)?.size ?? 0,

    upgrade(conn) {
      if (aware.has(conn)) return;
      aware.add(conn);
      const sub = bySocket.get(conn)?.get(GENERAL_ROOM_ID);
      if (sub) sub.legacy = false;
    },
    isLegacy: (conn) => !aware.has(conn),

    change: delivery.change,

    toRoom(roomId, data, filter) {
      const pipe = pipes.get(roomId);
      if (!pipe) return;
      for (const conn of pipe.subs.keys()) if (!filter || filter(conn)) hub.push(conn, data);
    },

    removeUser(roomId, userId) {
      const pipe = pipes.get(roomId);
      if (!pipe) return;
      for (const conn of [...pipe.subs.keys()]) {
        if (conn.identity?.userId !== userId) continue;
        registry.drop(pipe, conn);
        hub.send(conn, encode({ type: 'unsubscribed', roomId, reason: 'removed' }));
      }
    },

    localUsers: (roomId) => [...(pipes.get(roomId)?.users.keys() ?? [])],
    rooms: () => [...pipes.keys()],
    catchUp: delivery.catchUp,
    stats: () => ({ rooms: pipes.size, subscriptions: registry.subscriptions() }),
  };
}
