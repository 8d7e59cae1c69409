// A private Redis Cluster (3 masters + 3 replicas) from Debian's redis-server, on free loopback ports with private
// directories under a tmp dir; `cluster-node-timeout` is short so a killed master's replica takes over within
// seconds. Every process is killed when the test process exits, even if a test forgets close().
//
//   const rc = await startRedisCluster();       // rc.url → 'redis://127.0.0.1:p1,redis://127.0.0.1:p2,…'
//   const port = await rc.killMaster();          // SIGKILL the master of the first slot range
//   await rc.waitForFailover(port);              // a replica took its slots; cluster_state:ok everywhere
//   await rc.restartNode(port);                  // comes back (as a replica of its replacement)
//   await rc.close();
//
// It also satisfies TestRedis (stop/start = every node), so the multi-instance harness can run on it
// (HERALD_TEST_CACHE=cluster, see cluster.ts).
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { TestRedis } from './redis-server.js';
import { trackChild } from './redis-server.js';

const run = promisify(execFile);

/** Lower than Redis' default (15 s) so failover takes ~2 s: a master is suspected after this long. */
export const CLUSTER_NODE_TIMEOUT_MS = 1_000;

export interface ClusterNodeInfo {
  id: string;
  port: number;
  role: 'master' | 'replica';
  /** The master this replica follows (its node id), for replicas. */
  masterId?: string;
  connected: boolean;
  slots: string[];
}

export interface TestRedisCluster extends TestRedis {
  ports: number[];
  /** Comma-separated seed URLs (every node): CACHE_URL with CACHE_CLUSTER=true. */
  url: string;
  dir: string;
  nodes(): Promise<ClusterNodeInfo[]>;
  /** SIGKILLs a master (the one owning slot 0 unless `port` is given); resolves with its port. */
  killMaster(port?: number): Promise<number>;
  /** Resolves once the killed node's slots are served by a connected master and every live node says ok. */
  waitForFailover(killedPort: number, timeoutMs?: number): Promise<{ newMasterPort: number }>;
  restartNode(port: number): Promise<void>;
  /** Everything the node wrote to its log so far. */
  log(port: number): string;
  /** Runs a command on one node (redis-cli), for assertions. */
  cli(port: number, ...args: string[]): Promise<string>;
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A free port whose cluster bus port (+10000) is free as well; below the ephemeral range so both exist. */
async function freeClusterPort(taken: Set<number>): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if (taken.has(port)) continue;
    if ((await canListen(port)) && (await canListen(port + 10_000))) {
      taken.add(port);
      return port;
    }
  }
  throw new Error('no free port pair for a cluster node');
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export async function startRedisCluster(
  options: { masters?: number; replicas?: number } = {},
): Promise<TestRedisCluster> {
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 1;
  const count = masters * (1 + replicas);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'herald-rc-'));
  const taken = new Set<number>();
  const ports: number[] = [];
  for (let i = 0; i < count; i++) ports.push(await freeClusterPort(taken));
  const children = new Map<number, ChildProcess>();
  const logs = new Map<number, string>();

  const cli = async (port: number, ...args: string[]) => {
    const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], {
      timeout: 10_000,
    });
    return stdout;
  };

  const isUp = (port: number) => {
    const c = children.get(port);
    return c !== undefined && c.exitCode === null && c.signalCode === null;
  };

  const launch = async (port: number) => {
    const nodeDir = path.join(dir, String(port));
    await run('mkdir', ['-p', nodeDir]);
    const proc = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        nodeDir,
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        '--cluster-node-timeout',
        String(CLUSTER_NODE_TIMEOUT_MS),
        '--save',
        '',
        '--appendonly',
        'no',
        '--logfile',
        '',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    trackChild(proc);
    children.set(port, proc);
    let output = '';
    // Kept (and still appended to after start) for failure messages and debugging: log(port).
    logs.set(port, '');
    proc.stdout?.on('data', (chunk: Buffer) => logs.set(port, (logs.get(port) ?? '') + chunk.toString()));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`cluster node ${port} did not start:\n${output}`)),
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
        reject(new Error(`cluster node ${port} exited (${code}):\n${output}`));
      });
    });
    proc.stderr?.resume();
  };

  const kill = async (port: number) => {
    const proc = children.get(port);
    if (!proc || !isUp(port)) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGKILL');
    await exited;
  };

  const nodes = async (fromPort?: number): Promise<ClusterNodeInfo[]> => {
    const via = fromPort ?? ports.find(isUp);
    if (via === undefined) throw new Error('no cluster node is running');
    const text = await cli(via, 'cluster', 'nodes');
    return text
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const [id = '', addr = '', flags = '', master = '', , , , state = '', ...slots] = line.split(' ');
        return {
          id,
          port: Number(addr.split('@')[0]?.split(':')[1]),
          role: flags.includes('master') ? 'master' : 'replica',
          masterId: master === '-' ? undefined : master,
          connected: state === 'connected' && !flags.includes('fail'),
          slots,
        };
      });
  };

  const allOk = async () => {
    for (const port of ports.filter(isUp)) {
      const info = await cli(port, 'cluster', 'info').catch(() => '');
      if (!info.includes('cluster_state:ok')) return false;
    }
    return true;
  };

  const waitUntil = async (what: string, check: () => Promise<boolean>, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (await check().catch(() => false)) return;
      await delay(100);
    }
    throw new Error(`redis cluster: ${what} within ${timeoutMs} ms`);
  };

  /**
   * Every live node sees every other live node as connected and says cluster_state:ok, and every replica has
   * synchronised with its master (a replica that never did cannot be promoted).
   */
  const settled = async () => {
    if (!(await allOk())) return false;
    for (const port of ports.filter(isUp)) {
      const replication = await cli(port, 'info', 'replication');
      if (replication.includes('role:slave') && !replication.includes('master_link_status:up')) return false;
      const seen = await nodes(port);
      const up = seen.filter((n) => isUp(n.port));
      if (up.length !== ports.filter(isUp).length || up.some((n) => !n.connected)) return false;
    }
    return true;
  };

  const startAll = async () => {
    await Promise.all(ports.filter((p) => !isUp(p)).map(launch));
  };
  const stopAll = async () => {
    await Promise.all(ports.map(kill));
  };

  try {
    await startAll();
    await run(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      { timeout: 60_000 },
    );
    await waitUntil('cluster_state:ok on every node', settled, 30_000);
  } catch (err) {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }

  /** Roles before the last killMaster(), to name the promoted replica. */
  let before: ClusterNodeInfo[] = [];
  const cluster: TestRedisCluster = {
    ports,
    port: ports[0] ?? 0,
    url: ports.map((p) => `redis://127.0.0.1:${p}`).join(','),
    dir,
    isRunning: () => ports.some(isUp),
    nodes: () => nodes(),
    log: (port) => logs.get(port) ?? '',
    cli,
    async start() {
      // Nodes keep nodes.conf in their directory: restarted, they rejoin with their slots (and no data).
      await startAll();
      await waitUntil('cluster_state:ok after a restart', settled, 30_000);
    },
    async stop() {
      await stopAll();
    },
    async restart() {
      await stopAll();
      await cluster.start();
    },
    async killMaster(port) {
      const list = await nodes();
      before = list;
      const target = port
        ? list.find((n) => n.port === port && n.role === 'master')
        : list.find((n) => n.role === 'master' && n.slots.some((s) => s === '0' || s.startsWith('0-')));
      if (!target) throw new Error(`no master ${port ?? 'owning slot 0'}`);
      await kill(target.port);
      return target.port;
    },
    async waitForFailover(killedPort, timeoutMs = 30_000) {
      let newMasterPort = 0;
      await waitUntil(
        `a replica replaced the master on ${killedPort}`,
        async () => {
          if (!(await allOk())) return false;
          const serving = (await nodes()).filter(
            (n) => n.role === 'master' && n.connected && n.slots.length > 0 && n.port !== killedPort,
          );
          if (serving.length < masters) return false;
          const promoted = serving.find((n) => before.find((b) => b.port === n.port)?.role === 'replica');
          newMasterPort = promoted?.port ?? 0;
          return true;
        },
        timeoutMs,
      );
      return { newMasterPort };
    },
    async restartNode(port) {
      if (!isUp(port)) await launch(port);
      await waitUntil(`node ${port} rejoined`, settled, 30_000);
    },
    async close() {
      await stopAll();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}
