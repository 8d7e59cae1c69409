// Owns where a new SSE stream starts: the client's Last-Event-ID, whether the log can replay from it exactly
// (otherwise the stream starts at the present and says `resync: true`), and the replay read.
// Design: docs/architecture.md "Ordering and convergence".

import type { NotificationRepository } from '../repository.js';
import type { UserCursor } from '../rows.js';
import { eventBody, LOG_PAGE } from './order.js';

/** What the client asked to resume from (the Last-Event-ID header). */
export type ResumeRequest = { kind: 'none' } | { kind: 'cursor'; seq: number } | { kind: 'invalid' };

export function parseLastEventId(raw: string | undefined): ResumeRequest {
  if (raw === undefined || raw.trim() === '') return { kind: 'none' };
  const value = raw.trim();
  if (!/^\d{1,15}$/.test(value)) return { kind: 'invalid' };
  return { kind: 'cursor', seq: Number(value) };
}

// A client further behind than this refetches instead of replaying (notification retention keeps ≤ 1,000).
export const REPLAY_MAX = 5_000;

export interface ResumePlan {
  /** The seq the stream's cursor starts at. */
  start: number;
  /** The log is replayed from `start` to the cursor read at connect. */
  resumed: boolean;
  /** The client's position cannot be replayed exactly: it refetches (`connected.resync`). */
  resync: boolean;
}

/** Where a stream starts, given the user's cursor as read at connect. */
export function planResume(resume: ResumeRequest, cursor: UserCursor): ResumePlan {
  if (resume.kind === 'invalid') return { start: cursor.lastSeq, resumed: false, resync: true };
  if (resume.kind === 'none') return { start: cursor.lastSeq, resumed: false, resync: false };
  const from = resume.seq;
  const inLog = from === cursor.lastSeq || (cursor.oldestSeq !== null && cursor.oldestSeq <= from + 1);
  // Ahead of the server (a cursor from another database, or made up), pruned, or too far behind.
  if (from > cursor.lastSeq || !inLog || cursor.lastSeq - from > REPLAY_MAX) {
    return { start: cursor.lastSeq, resumed: false, resync: true };
  }
  return { start: from, resumed: true, resync: false };
}

/** The logged events after `from` up to `upTo` (the cursor read at connect), framed for the stream. */
export async function readReplay(
  repo: Pick<NotificationRepository, 'eventsAfter'>,
  userId: string,
  from: number,
  upTo: number,
): Promise<Array<{ seq: number; body: string }>> {
  const replay: Array<{ seq: number; body: string }> = [];
  let after = from;
  while (after < upTo) {
    const rows = await repo.eventsAfter(userId, after, LOG_PAGE);
    if (rows.length === 0) break;
    for (const row of rows) {
      if (row.seq > upTo) break;
      replay.push({ seq: row.seq, body: eventBody(row.name, row.data) });
      after = row.seq;
    }
    if (rows.length < LOG_PAGE) break;
  }
  return replay;
}
