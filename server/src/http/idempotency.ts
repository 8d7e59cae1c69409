// Owns Idempotency-Key handling for any write route (the admin broadcast uses it): claims in PostgreSQL with an
// owner heartbeat, so retries get the stored result and a crashed owner's claim is taken over (design:
// docs/architecture.md "Idempotent broadcasts across crashes").
import { createHash } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { type Db, jsonb, rowsOf } from '../infra/db.js';
import { deleteOlderThan, type HousekeepingTask } from '../infra/housekeeping.js';
import type { CutShort } from './drain.js';
import { AppError } from './errors.js';

export const IdempotencyErrorCode = {
  /** The key's row changed between the claim attempt and the read: retry. */
  IDEMPOTENCY_CONFLICT: 'IDEMPOTENCY_CONFLICT',
  IDEMPOTENCY_KEY_REUSED: 'IDEMPOTENCY_KEY_REUSED',
  IDEMPOTENCY_IN_PROGRESS: 'IDEMPOTENCY_IN_PROGRESS',
} as const;

type Part = { value: unknown } | { text: string };

/**
 * Canonical JSON (sorted keys) so key order in the client's body does not change the hash. Iterative (an explicit
 * stack of pending values and punctuation), so no nesting depth can overflow the call stack.
 */
function canonical(root: unknown): string {
  const out: string[] = [];
  const stack: Part[] = [{ value: root }];
  while (stack.length > 0) {
    const part = stack.pop() as Part;
    if ('text' in part) {
      out.push(part.text);
      continue;
    }
    const value = part.value;
    const parts: Part[] = [];
    if (Array.isArray(value)) {
      parts.push({ text: '[' });
      value.forEach((item, i) => {
        if (i > 0) parts.push({ text: ',' });
        parts.push({ value: item });
      });
      parts.push({ text: ']' });
    } else if (value && typeof value === 'object') {
      const entries = Object.entries(value as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      parts.push({ text: '{' });
      entries.forEach(([k, v], i) => {
        parts.push({ text: `${i > 0 ? ',' : ''}${JSON.stringify(k)}:` }, { value: v });
      });
      parts.push({ text: '}' });
    } else {
      // JSON.stringify(undefined) is undefined: an undefined array item adds nothing, as before.
      out.push(JSON.stringify(value) ?? '');
      continue;
    }
    for (let i = parts.length - 1; i >= 0; i--) stack.push(parts[i] as Part);
  }
  return out.join('');
}

export function requestHash(body: unknown): string {
  return createHash('sha256').update(canonical(body)).digest('hex');
}

export interface ClaimOptions {
  /** This process's instance id, recorded as the claim's owner. */
  instanceId: string;
  /** How often the owner refreshes the claim's heartbeat while the work runs. */
  heartbeatMs: number;
  /** A claim whose heartbeat is older than this belongs to a dead owner and may be taken over. */
  staleMs: number;
  /**
   * The shutdown drain: when it cuts this request short, the claim is released at once (before the client is
   * answered 503), so a retry on another instance takes the work over and resumes it without waiting staleMs.
   */
  cutShort?: CutShort;
}

export interface ClaimedRun {
  /** `scope:key`, stable across retries: the work derives its resumable identity from it. */
  claimKey: string;
  /** Aborted when shutdown cuts the request short: the work stops at its next safe point. */
  signal?: AbortSignal;
}

export async function withIdempotency<T extends Record<string, unknown>>(
  db: Db,
  params: { scope: string; key: string; body: unknown },
  claim: ClaimOptions,
  run: (ctx: ClaimedRun) => Promise<T>,
): Promise<T> {
  const key = `${params.scope}:${params.key}`;
  const hash = requestHash(params.body);
  // Staleness is judged on the database clock (heartbeats are written with now() too), so instance clock skew
  // cannot make a live claim look dead. Rows from before the heartbeat column fall back to created_at.
  const claimed = rowsOf<{ key: string }>(
    await db.execute(
      sql`insert into idempotency_key (key, scope, request_hash, owner_instance, heartbeat_at)
          values (${key}, ${params.scope}, ${hash}, ${claim.instanceId}, now())
          on conflict (key) do update
            set created_at = now(), request_hash = excluded.request_hash,
                owner_instance = excluded.owner_instance, heartbeat_at = now()
            where idempotency_key.response is null
              and idempotency_key.request_hash = excluded.request_hash
              and coalesce(idempotency_key.heartbeat_at, idempotency_key.created_at)
                    < now() - ${`${claim.staleMs} milliseconds`}::interval
          returning key`,
    ),
  );
  if (claimed.length === 0) {
    const [row] = rowsOf<{ request_hash: string; response: T | null }>(
      await db.execute(sql`select request_hash, response from idempotency_key where key = ${key}`),
    );
    if (!row)
      throw new AppError(
        409,
        IdempotencyErrorCode.IDEMPOTENCY_CONFLICT,
        'Idempotency key state changed; retry',
      );
    if (row.request_hash !== hash) {
      throw new AppError(
        409,
        IdempotencyErrorCode.IDEMPOTENCY_KEY_REUSED,
        'This Idempotency-Key was already used with a different request body',
      );
    }
    if (row.response === null) {
      throw new AppError(
        409,
        IdempotencyErrorCode.IDEMPOTENCY_IN_PROGRESS,
        'A request with this Idempotency-Key is still running',
        undefined,
        {
          'retry-after': '1',
        },
      );
    }
    return row.response;
  }
  // Only the current owner touches the row: after a takeover (this instance was presumed dead, e.g. a long
  // database stall) the new owner's claim stands, and both runs converge on the same per-user rows anyway.
  const mine = sql`key = ${key} and response is null and owner_instance = ${claim.instanceId}`;
  const heartbeat = setInterval(() => {
    db.execute(sql`update idempotency_key set heartbeat_at = now() where ${mine}`).catch(() => {
      // A missed beat only brings a takeover closer; the next beat tries again.
    });
  }, claim.heartbeatMs);
  heartbeat.unref();
  const release = () => db.execute(sql`delete from idempotency_key where ${mine}`).then(() => undefined);
  const offCutShort = claim.cutShort?.onCutShort(async () => {
    clearInterval(heartbeat);
    await release();
  });
  let result: T;
  try {
    result = await run({ claimKey: key, signal: claim.cutShort?.signal });
  } catch (err) {
    clearInterval(heartbeat);
    offCutShort?.();
    // Nothing (or only part) was done: release the key so the client's retry runs again (and resumes). A run cut
    // short by shutdown was released by the drain already, and the pools may be closed by now: nothing to do.
    if (!claim.cutShort?.signal.aborted) await release();
    throw err;
  }
  clearInterval(heartbeat);
  try {
    // Only while still the owner: a run that finished after its claim was released or taken over leaves the
    // result to the run that holds the claim now (both converge on the same per-user rows).
    await db.execute(
      sql`update idempotency_key set response = ${jsonb(result)}, heartbeat_at = now()
          where ${mine}`,
    );
  } finally {
    // After the last query: the drain keeps the pools open until this is called.
    offCutShort?.();
  }
  return result;
}

/** Idempotency keys answer retries for 24 h (CONTRACT §5); older ones are deleted. */
export const idempotencyRetentionTask = (): HousekeepingTask =>
  deleteOlderThan({
    owner: 'idempotency',
    countName: 'idempotencyKeysDeleted',
    statement: sql`delete from idempotency_key where created_at < now() - make_interval(hours => 24) returning 1`,
  });
