// A private redis-server process on a free loopback port, for tests that stop and restart the store (degraded
// mode, recovery). Never touches the shared Redis. Every process started here is killed when the test process
// exits, even if a test forgets to call stop().
//
//   const redis = await startRedisServer();   // redis.url → redis://127.0.0.1:<port>
//   await redis.stop();                       // SIGKILL by default: clients see an abrupt outage
//   await redis.start();                      // same port, empty data set
//   await redis.close();                      // stop for good
import { type ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';

export interface TestRedis {
  port: number;
  url: string;
  isRunning(): boolean;
  /** Starts the server again on the same port (no-op when running). */
  start(): Promise<void>;
  /** Stops the server; SIGKILL simulates a crash, SIGTERM a clean stop. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  restart(): Promise<void>;
  close(): Promise<void>;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/** Kills every child registered here when the test process exits (synchronously: 'exit' allows nothing else). */
export function trackChild(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const c of live) c.kill('SIGKILL');
    });
  }
}

/** A port that was free a moment ago (the OS picks it); good enough for tests on loopback. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function waitExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export async function startRedisServer(options: { port?: number } = {}): Promise<TestRedis> {
  const port = options.port ?? (await freePort());
  let child: ChildProcess | undefined;

  const launch = async () => {
    const proc = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--logfile', ''],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    trackChild(proc);
    child = proc;
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`redis-server did not start on ${port}:\n${output}`)),
        10_000,
      );
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      };
      proc.stdout?.on('data', onData);
      proc.stderr?.on('data', onData);
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited (${code}) on ${port}:\n${output}`));
      });
      proc.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
    // Keep draining the pipes so the server never blocks on a full pipe.
    proc.stdout?.resume();
    proc.stderr?.resume();
  };

  const isRunning = () => child !== undefined && child.exitCode === null && child.signalCode === null;
  const stop = async (signal: NodeJS.Signals = 'SIGKILL') => {
    const proc = child;
    if (!proc || !isRunning()) return;
    proc.kill(signal);
    await waitExit(proc);
  };

  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    isRunning,
    async start() {
      if (!isRunning()) await launch();
    },
    stop,
    async restart() {
      await stop();
      await launch();
    },
    close: () => stop('SIGKILL'),
  };
}
