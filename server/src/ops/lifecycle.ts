// Owns the ordered, bounded shutdown sequence (docs/operations.md, table row "Shutdown"). Fastify's close runs the
// phases up to close-connections in preClose (the server still answers, /health says 503), the rest in onClose.

import type { Logger } from '../infra/logger.js';
import { SHUTDOWN_PHASES, type ShutdownHooks, type ShutdownPhase } from '../infra/shutdown.js';
import { withTimeout } from '../infra/timeout.js';

export { SHUTDOWN_PHASES, type ShutdownPhase } from '../infra/shutdown.js';

type Step = { name: string; run: () => Promise<void> | void };

export interface LifecycleOptions {
  logger?: Logger;
  /**
   * Bound on the sequence besides the request grace; a phase still running when its share is spent is
   * abandoned (logged). The whole sequence is bounded by graceMs + timeoutMs.
   */
  timeoutMs?: number;
  /** SHUTDOWN_GRACE_MS: how long the drain-requests phase may wait for in-flight requests. */
  graceMs?: number;
  /** Pause after stop-accepting so load balancers see the 503 before connections are closed. */
  drainMs?: number;
}

export interface Lifecycle extends ShutdownHooks {
  isShuttingDown(): boolean;
  /** Flips isShuttingDown (health answers 503 from now on) without running any phase yet. */
  beginShutdown(): void;
  onShutdown(phase: ShutdownPhase, name: string, run: Step['run']): void;
  /** Runs the phases not yet run, up to and including `phase`. */
  runThrough(phase: ShutdownPhase, onStepError?: (name: string, err: unknown) => void): Promise<void>;
  /** Runs every remaining phase in order; a failing step is reported and does not stop the sequence. */
  shutdown(onStepError?: (name: string, err: unknown) => void): Promise<void>;
  /** Phases completed so far, in order (for tests and diagnostics). */
  completedPhases(): ShutdownPhase[];
}

const MIN_PHASE_BUDGET_MS = 250;

export function createLifecycle(options: LifecycleOptions = {}): Lifecycle {
  const steps = new Map<ShutdownPhase, Step[]>(SHUTDOWN_PHASES.map((p) => [p, []]));
  const completed: ShutdownPhase[] = [];
  const timeoutMs = options.timeoutMs ?? 10_000;
  let shuttingDown = false;
  let deadline = 0;
  let next = 0;
  let chain: Promise<void> = Promise.resolve();

  const begin = () => {
    if (shuttingDown) return;
    shuttingDown = true;
    deadline = Date.now() + timeoutMs + (options.graceMs ?? 0);
  };

  const runPhase = async (phase: ShutdownPhase, onStepError?: (name: string, err: unknown) => void) => {
    const started = Date.now();
    options.logger?.info({ phase }, `shutdown phase ${phase}`);
    // Steps within a phase are independent; run them together.
    const all = Promise.all(
      (steps.get(phase) ?? []).map(async (step) => {
        try {
          await step.run();
        } catch (err) {
          onStepError?.(step.name, err);
        }
      }),
    );
    if (phase === 'stop-accepting' && options.drainMs) {
      await new Promise((resolve) => setTimeout(resolve, options.drainMs));
    }
    const budget = Math.max(MIN_PHASE_BUDGET_MS, deadline - Date.now());
    // The steps' errors are caught above, so a rejection here can only be the deadline.
    const timedOut = await withTimeout(all, budget).then(
      () => false,
      () => true,
    );
    if (timedOut) options.logger?.error({ phase, budgetMs: budget }, 'shutdown phase timed out; moving on');
    completed.push(phase);
    options.logger?.debug({ phase, ms: Date.now() - started }, 'shutdown phase done');
  };

  const lifecycle: Lifecycle = {
    isShuttingDown: () => shuttingDown,
    beginShutdown: begin,
    onShutdown(phase, name, run) {
      steps.get(phase)?.push({ name, run });
    },
    runThrough(phase, onStepError) {
      begin();
      const last = SHUTDOWN_PHASES.indexOf(phase);
      chain = chain.then(async () => {
        while (next <= last) {
          const current = SHUTDOWN_PHASES[next] as ShutdownPhase;
          next++;
          await runPhase(current, onStepError);
        }
      });
      return chain;
    },
    async shutdown(onStepError) {
      await lifecycle.runThrough('close-pools', onStepError);
      if (completed.length === SHUTDOWN_PHASES.length && !completedLogged) {
        completedLogged = true;
        options.logger?.info('shutdown complete');
      }
    },
    completedPhases: () => [...completed],
  };
  let completedLogged = false;
  return lifecycle;
}
