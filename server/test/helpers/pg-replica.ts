// A private PostgreSQL primary and one streaming replica on free loopback ports, both in a temp directory:
// `initdb` (wal_level=replica), then `pg_basebackup -R` from the running primary, then the replica started as a hot
// standby. Run as the `postgres` OS user when the tests run as root (initdb refuses root). Durability is off
// (fsync, full_page_writes): these clusters live for one test file.
//
//   const pair = await startReplicaPair();
//   pair.primaryUrl('herald'); pair.replicaUrl('herald');   // postgres:// URLs of one database on each
//   await pair.pauseReplay(); await pair.resumeReplay();    // pg_wal_replay_pause() / _resume() on the replica
//   await pair.stopReplica(); await pair.startReplica();    // the replica disappears and comes back
//   await pair.close();
import { type ExecFileSyncOptions, execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './redis-server.js';

const BIN_DIRS = [
  '/usr/lib/postgresql/15/bin',
  '/usr/lib/postgresql/16/bin',
  '/usr/lib/postgresql/17/bin',
  '/usr/local/bin',
];
export const PG_BIN_DIR = BIN_DIRS.find(
  (d) => existsSync(path.join(d, 'initdb')) && existsSync(path.join(d, 'pg_basebackup')),
);

export interface ReplicaPair {
  /** The temp directory holding `primary/` and `replica/` (data directories) and their logs. */
  dataDir: string;
  primaryPort: number;
  replicaPort: number;
  primaryUrl(database: string): string;
  replicaUrl(database: string): string;
  /** Runs SQL on the primary's `postgres` database (create database, …). */
  primarySql(text: string): Promise<void>;
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  /** Waits until the replica has replayed everything the primary had written when called. */
  caughtUp(timeoutMs?: number): Promise<void>;
  stopReplica(): void;
  startReplica(): void;
  close(): Promise<void>;
}

const asRoot = process.getuid?.() === 0;

function run(bin: string, args: string[], options: ExecFileSyncOptions = {}): void {
  const file = path.join(PG_BIN_DIR ?? '', bin);
  const argv = asRoot ? ['-u', 'postgres', '--', file, ...args] : args;
  execFileSync(asRoot ? 'runuser' : file, argv, { stdio: 'pipe', timeout: 120_000, ...options });
}

async function query<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

const settings = (port: number, dir: string) =>
  [
    '',
    `port = ${port}`,
    "listen_addresses = '127.0.0.1'",
    `unix_socket_directories = '${dir}'`,
    'wal_level = replica',
    'max_wal_senders = 4',
    'hot_standby = on',
    'hot_standby_feedback = on',
    'fsync = off',
    'full_page_writes = off',
    'synchronous_commit = off',
    'shared_buffers = 32MB',
    'max_connections = 100',
    "log_min_messages = 'warning'",
    '',
  ].join('\n');

export async function startReplicaPair(): Promise<ReplicaPair> {
  if (!PG_BIN_DIR) throw new Error('initdb / pg_basebackup not found');
  const dir = mkdtempSync(path.join(tmpdir(), 'herald-pgpair-'));
  chmodSync(dir, 0o777);
  if (asRoot) execFileSync('chown', ['postgres:postgres', dir]);
  const primaryDir = path.join(dir, 'primary');
  const replicaDir = path.join(dir, 'replica');
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  const url = (port: number, database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const ctl = (dataDir: string, action: 'start' | 'stop', extra: string[] = []) =>
    run('pg_ctl', [
      '-D',
      dataDir,
      '-l',
      path.join(dir, `${path.basename(dataDir)}.log`),
      '-w',
      '-t',
      '60',
      action,
      ...extra,
    ]);
  let replicaRunning = false;

  run('initdb', [
    '-D',
    primaryDir,
    '-U',
    'postgres',
    '--auth=trust',
    '-E',
    'UTF8',
    '--no-sync',
    '--no-instructions',
  ]);
  appendFileSync(path.join(primaryDir, 'postgresql.conf'), settings(primaryPort, dir));
  ctl(primaryDir, 'start');
  try {
    run('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-D',
      replicaDir,
      '-R',
      '-X',
      'stream',
      '--no-sync',
    ]);
    // The copied postgresql.conf names the primary's port; the last setting wins.
    appendFileSync(path.join(replicaDir, 'postgresql.conf'), settings(replicaPort, dir));
    ctl(replicaDir, 'start');
    replicaRunning = true;
  } catch (err) {
    ctl(primaryDir, 'stop', ['-m', 'immediate']);
    throw err;
  }

  const pair: ReplicaPair = {
    dataDir: dir,
    primaryPort,
    replicaPort,
    primaryUrl: (database) => url(primaryPort, database),
    replicaUrl: (database) => url(replicaPort, database),
    async primarySql(text) {
      await query(url(primaryPort, 'postgres'), text);
    },
    async pauseReplay() {
      await query(url(replicaPort, 'postgres'), 'select pg_wal_replay_pause()');
    },
    async resumeReplay() {
      await query(url(replicaPort, 'postgres'), 'select pg_wal_replay_resume()');
    },
    async caughtUp(timeoutMs = 20_000) {
      const [row] = await query<{ lsn: string }>(
        url(primaryPort, 'postgres'),
        'select pg_current_wal_insert_lsn()::text as lsn',
      );
      const target = row?.lsn ?? '0/0';
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const [r] = await query<{ ok: boolean }>(
          url(replicaPort, 'postgres'),
          `select pg_last_wal_replay_lsn() >= '${target}'::pg_lsn as ok`,
        );
        if (r?.ok) return;
        if (Date.now() > deadline) throw new Error(`replica did not reach ${target}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    stopReplica() {
      if (!replicaRunning) return;
      ctl(replicaDir, 'stop', ['-m', 'immediate']);
      replicaRunning = false;
    },
    startReplica() {
      if (replicaRunning) return;
      ctl(replicaDir, 'start');
      replicaRunning = true;
    },
    async close() {
      try {
        pair.stopReplica();
      } catch {
        // Already gone.
      }
      try {
        ctl(primaryDir, 'stop', ['-m', 'immediate']);
      } catch {
        // Already gone.
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return pair;
}
