// The one housekeeping scheduler: every table owner registers its own clean-up task here (notifications their
// rows and event log, the email outbox its finished rows, webhooks and push their delivery logs, idempotency its
// keys, admin its finished sends, email its digests) and one run executes them all, in one transaction under one
// cluster-wide advisory lock, every RETENTION_INTERVAL_MS on every instance (docs/architecture.md, "Retention").
import { sql } from 'drizzle-orm';
import { type Db, rowsOf } from './db.js';
import type { Logger } from './logger.js';

/** Arbitrary but fixed; distinct from the migration lock. Tests and operators may hold it to pause runs. */
export const HOUSEKEEPING_LOCK_KEY = 727_001_043;

export type Executor = Pick<Db, 'execute'>;

export interface TaskOutcome {
  /** Rows deleted per kind (named uniquely across tasks: they are merged into one result and one log line). */
  counts: Record<string, number>;
  /** Runs after the run's transaction committed (e.g. cache invalidation for the rows that went). */
  afterCommit?: () => Promise<void>;
}

export interface HousekeepingTask {
  /** The owning module, for logs (`notifications`, `email-outbox`, …). */
  owner: string;
  run(tx: Executor): Promise<TaskOutcome>;
}

export type HousekeepingResult = { ran: boolean } & Record<string, number | boolean>;

export interface Housekeeping {
  /** Adds an owner's task; the composition root registers them all before start(). */
  register(task: HousekeepingTask): void;
  /** One run now (also the CLI's `retention`): `ran: false` when another instance holds the lock. */
  runOnce(): Promise<HousekeepingResult>;
  start(): void;
  stop(): Promise<void>;
}

export function createHousekeeping(deps: { db: Db; logger: Logger; intervalMs: number }): Housekeeping {
  const tasks: HousekeepingTask[] = [];
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;

  const runOnce = async (): Promise<HousekeepingResult> => {
    const outcomes = await deps.db.transaction(async (tx) => {
      const [lock] = rowsOf<{ locked: boolean }>(
        await tx.execute(sql`select pg_try_advisory_xact_lock(${HOUSEKEEPING_LOCK_KEY}) as locked`),
      );
      if (!lock?.locked) return null;
      const done: TaskOutcome[] = [];
      // In registration order, one statement at a time (a transaction runs one at a time anyway).
      for (const task of tasks) done.push(await task.run(tx));
      return done;
    });
    if (!outcomes) return { ran: false };
    const counts: Record<string, number> = {};
    for (const outcome of outcomes) Object.assign(counts, outcome.counts);
    for (const [i, outcome] of outcomes.entries()) {
      try {
        await outcome.afterCommit?.();
      } catch (err) {
        deps.logger.warn({ err, owner: tasks[i]?.owner }, 'housekeeping: after-commit step failed');
      }
    }
    deps.logger.info(counts, 'housekeeping run');
    return { ran: true, ...counts };
  };

  return {
    register(task) {
      tasks.push(task);
    },
    runOnce,
    start() {
      timer = setInterval(() => {
        if (running) return;
        running = runOnce()
          .catch((err: unknown) => deps.logger.warn({ err }, 'housekeeping run failed'))
          .finally(() => {
            running = undefined;
          });
      }, deps.intervalMs);
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

/** A task that deletes one table's finished rows older than a bound: the common shape of the queue owners' tasks. */
export function deleteOlderThan(options: {
  owner: string;
  countName: string;
  /** The statement; must return one row per deleted row (`returning 1`). */
  statement: ReturnType<typeof sql>;
}): HousekeepingTask {
  return {
    owner: options.owner,
    async run(tx) {
      const [row] = rowsOf<{ n: number }>(
        await tx.execute(sql`with d as (${options.statement}) select count(*)::int as n from d`),
      );
      return { counts: { [options.countName]: Number(row?.n ?? 0) } };
    },
  };
}
