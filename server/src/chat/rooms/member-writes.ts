// The transaction helpers that room creation and membership changes share: adding members under the room's lock
// (so concurrent adds cannot overshoot a limit), the checks that run before, and aborting a transaction with a
// RoomError as its result.
import { sql } from 'drizzle-orm';
import { accountRelations } from '../../auth/accounts.js';
import type { Db } from '../../infra/db.js';
import { rowsOf, textArray } from '../../infra/db.js';
import { GENERAL_ROOM_ID } from '../protocol.js';
import type { MemberRole, RoomError, RoomKind, RoomLimits } from './model.js';
import { type Exec, rowsFrom } from './queries.js';

/** Thrown inside a transaction to roll it back and answer with `result`. */
export class Abort extends Error {
  constructor(readonly result: RoomError) {
    super(result.error);
  }
}

/** Runs `fn` in a transaction; an Abort rolls it back and becomes the result. */
export const inTx = async <T>(db: Db, fn: (tx: Exec) => Promise<T>): Promise<T | RoomError> => {
  try {
    return await db.transaction(async (tx) => fn(tx));
  } catch (err) {
    if (err instanceof Abort) return err.result;
    throw err;
  }
};

/** The value, or an Abort with the error it is. */
export const must = <T>(value: T | RoomError): T => {
  if (typeof value === 'object' && value !== null && 'error' in value) throw new Abort(value as RoomError);
  return value as T;
};

export const lockRoom = async (tx: Exec, roomId: string) =>
  rowsOf<{ kind: RoomKind }>(
    await tx.execute(sql`select kind from chat_room where id = ${roomId} for update`),
  )[0];

// Advisory lock namespace of a user's room memberships (two-key form: a keyspace apart from the one-key locks of
// migrations and the last-admin guard).
const MEMBERSHIP_LOCK_NAMESPACE = 6_100;

/**
 * Takes the membership locks of `userIds` until the transaction ends: a room's lock serialises adds to that room
 * only, so two transactions adding one user to two different rooms would both count the user under the limit and
 * both insert. Locks are taken in key order (no deadlock between two multi-user adds) and always after the room's
 * own lock; transaction-scoped, so they hold behind PgBouncer in transaction mode.
 */
export const lockUsers = async (tx: Exec, userIds: string[]): Promise<void> => {
  if (userIds.length === 0) return;
  await tx.execute(sql`
      select pg_advisory_xact_lock(${MEMBERSHIP_LOCK_NAMESPACE}, k)
      from (select distinct hashtext(id) as k from unnest(${textArray(userIds)}) as u(id) order by k) keys`);
};

/** Users among `userIds` already at the rooms-per-user limit. */
export const atRoomLimit = async (db: Db, limits: RoomLimits, userIds: string[]): Promise<string[]> => {
  if (userIds.length === 0) return [];
  const r = await rowsFrom(db)<{ user_id: string }>(sql`
      select user_id from chat_member where user_id = any(${textArray(userIds)})
        and room_id <> ${GENERAL_ROOM_ID}
      group by user_id having count(*) >= ${limits.roomsPerUser}`);
  return r.map((x) => x.user_id);
};

export const unknownUsers = async (db: Db, userIds: string[]): Promise<string[]> => {
  if (userIds.length === 0) return [];
  const r = await rowsFrom(db)<{ id: string }>(
    sql`select id from ${accountRelations.unbannedProfiles} u where id = any(${textArray(userIds)})`,
  );
  const found = new Set(r.map((x) => x.id));
  return userIds.filter((id) => !found.has(id));
};

/**
 * Adds members inside a transaction holding the room's lock and the new members' membership locks: checks the
 * private-room size and each new member's room count there, so concurrent adds cannot overshoot either limit.
 */
export const insertMembers = async (
  tx: Exec,
  limits: RoomLimits,
  roomId: string,
  kind: RoomKind,
  userIds: string[],
  role: MemberRole,
): Promise<RoomError | number> => {
  if (userIds.length === 0) return 0;
  const fresh = rowsOf<{ user_id: string }>(
    await tx.execute(sql`
        select u.id as user_id from unnest(${textArray(userIds)}) as u(id)
        where not exists (select 1 from chat_member cm where cm.room_id = ${roomId} and cm.user_id = u.id)`),
  ).map((r) => r.user_id);
  if (fresh.length === 0) return 0;
  await lockUsers(tx, fresh);
  if (kind === 'private') {
    const count = rowsOf<{ member_count: number }>(
      await tx.execute(sql`select member_count from chat_room where id = ${roomId}`),
    )[0];
    if ((count?.member_count ?? 0) + fresh.length > limits.membersPerPrivateRoom)
      return { error: 'room_full' };
  }
  const full = rowsOf<{ user_id: string }>(
    await tx.execute(sql`
        select user_id from chat_member where user_id = any(${textArray(fresh)})
          and room_id <> ${GENERAL_ROOM_ID}
        group by user_id having count(*) >= ${limits.roomsPerUser}`),
  ).map((r) => r.user_id);
  if (full.length > 0) return { error: 'room_limit', userIds: full };
  await tx.execute(sql`
      insert into chat_member (room_id, user_id, role, last_read_seq)
      select ${roomId}, u.id, ${role}, r.last_seq from unnest(${textArray(fresh)}) as u(id), chat_room r
      where r.id = ${roomId}
      on conflict do nothing`);
  await tx.execute(
    sql`update chat_room set member_count = member_count + ${fresh.length} where id = ${roomId}`,
  );
  return fresh.length;
};
