// The shutdown port: the ordered phases of a graceful shutdown and the one call a part needs to hook into them.
// It lives on the lowest floor so features can declare it as a dependency; ops/lifecycle.ts implements it
// (docs/architecture.md, "Shutdown drain order").

export const SHUTDOWN_PHASES = [
  'stop-accepting', // health turns 503, no new streams/sockets
  'drain-requests', // no new connections; in-flight requests finish within SHUTDOWN_GRACE_MS or get 503
  'notify-clients', // WebSocket close 1001, SSE `error` event
  'close-connections',
  'remove-presence',
  'deregister',
  'close-pools',
] as const;
export type ShutdownPhase = (typeof SHUTDOWN_PHASES)[number];

export type ShutdownStep = () => Promise<void> | void;

/** What a feature sees of the lifecycle: register a step in a phase, and ask whether shutdown has begun. */
export interface ShutdownHooks {
  onShutdown(phase: ShutdownPhase, name: string, run: ShutdownStep): void;
  isShuttingDown(): boolean;
}

/** A latency observer (seconds) a feature reports into without knowing the metrics registry. */
export type ObserveSeconds = (seconds: number) => void;
