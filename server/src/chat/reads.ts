// Owns where chat's HTTP reads run with read replicas (DATABASE_READ_URL; docs/architecture.md "Read replicas"):
// history (`GET /chat/history`, `GET /chat/rooms/:id/messages`) and room lists (`GET /chat/rooms`) go to a replica
// that has replayed the reader's last change and the room's last change, else to the primary. Every chat change
// records the primary's WAL position, after its commit and before it is acknowledged or published, on the room it
// changed and on the users whose room list it changed. So a read right after the caller's own change (any
// instance) sees it, and a history read after a live frame of the room (anyone's message) shows that message.
// Membership checks that authorise a read are not routed here: they stay on the primary (rooms.access).
import type { Db } from '../infra/db.js';
import type { ReadPositions } from '../infra/read-positions.js';
import type { ReadRouter, WalPosition } from '../infra/read-replicas.js';

/** Whose changes a read depends on, or a change touches. */
export interface ChatScope {
  users?: string[];
  rooms?: string[];
  /**
   * The directory of public rooms (`GET /chat/rooms?scope=public`): which exist and who is in them. Changed by
   * creating one and by joins and removals; not by messages (its order by activity may trail by the replica's lag).
   */
  publicDirectory?: boolean;
}

export interface ChatReads {
  readonly enabled: boolean;
  /** After a change committed (any outcome that stored something), before the caller hears of it. Never throws. */
  changed(scope: ChatScope): Promise<void>;
  /** The position a read of this scope must see (see ReadPositions.of). */
  position(scope: ChatScope): Promise<WalPosition | null>;
  /** Runs a read on a source that has `position`; the primary without replicas. */
  readAt<T>(position: WalPosition | null, run: (db: Db) => Promise<T>): Promise<T>;
  /** position() then readAt(). */
  read<T>(scope: ChatScope, run: (db: Db) => Promise<T>): Promise<T>;
}

const keysOf = (scope: ChatScope): string[] => [
  ...(scope.users ?? []).map((id) => `u:${id}`),
  ...(scope.rooms ?? []).map((id) => `r:${id}`),
  ...(scope.publicDirectory ? ['d:public'] : []),
];

export function createChatReads(deps: {
  primary: Db;
  router: ReadRouter<Db> | undefined;
  positions: ReadPositions;
}): ChatReads {
  const { primary, router, positions } = deps;
  const readAt = <T>(position: WalPosition | null, run: (db: Db) => Promise<T>): Promise<T> =>
    router ? router.read(position, run, 'chat') : run(primary);
  return {
    enabled: positions.enabled,
    // Without replicas nothing is recorded: the send path keeps its one database and one store round trip.
    changed: (scope) =>
      positions.enabled ? positions.record([...new Set(keysOf(scope))]) : Promise.resolve(),
    position: (scope) => (positions.enabled ? positions.of(keysOf(scope)) : Promise.resolve(null)),
    readAt,
    async read(scope, run) {
      return readAt(positions.enabled ? await positions.of(keysOf(scope)) : null, run);
    },
  };
}
