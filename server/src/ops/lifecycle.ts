// Owns the ordered shutdown sequence. Features register steps in a phase; phases run in contract order.
export const SHUTDOWN_PHASES = [
  'stop-accepting', // health turns 503, no new streams/sockets
  'notify-clients', // WebSocket close 1001, SSE `error` event
  'close-connections',
  'remove-presence',
  'deregister',
  'close-pools',
] as const;
export type ShutdownPhase = (typeof SHUTDOWN_PHASES)[number];

type Step = { name: string; run: () => Promise<void> | void };

export interface Lifecycle {
  isShuttingDown(): boolean;
  onShutdown(phase: ShutdownPhase, name: string, run: Step['run']): void;
  /** Runs every phase in order; a failing step is reported and does not stop the sequence. */
  shutdown(onStepError?: (name: string, err: unknown) => void): Promise<void>;
}

export function createLifecycle(): Lifecycle {
  const steps = new Map<ShutdownPhase, Step[]>(SHUTDOWN_PHASES.map((p) => [p, []]));
  let shuttingDown = false;
  let running: Promise<void> | undefined;
  return {
    isShuttingDown: () => shuttingDown,
    onShutdown(phase, name, run) {
      steps.get(phase)?.push({ name, run });
    },
    shutdown(onStepError) {
      shuttingDown = true;
      running ??= (async () => {
        for (const phase of SHUTDOWN_PHASES) {
          // Steps within a phase are independent; run them together.
          await Promise.all(
            (steps.get(phase) ?? []).map(async (step) => {
              try {
                await step.run();
              } catch (err) {
                onStepError?.(step.name, err);
              }
            }),
          );
        }
      })();
      return running;
    },
  };
}
