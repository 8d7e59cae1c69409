// Owns the embedded database's lock file (DATA_DIR/herald.lock). PGlite is single-process: a second process
// opening the same directory (a CLI run next to a running server) works on its own copy of the data and one of
// them loses its writes. Whoever opens the embedded database takes this lock first; a lock whose process is gone
// (crash, kill -9, container restart) is detected by PID liveness and taken over.
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';

export const LOCK_FILE_NAME = 'herald.lock';

export interface LockHolder {
  pid: number;
  /** What holds it: "server" or the CLI command. */
  owner: string;
  startedAt: string;
}

export class DataDirLockedError extends Error {
  constructor(
    readonly file: string,
    readonly holder: LockHolder,
  ) {
    super(
      `the embedded database in ${path.dirname(file)} is in use by ${holder.owner} (pid ${holder.pid}, since ${holder.startedAt}); ` +
        `if no such process is running, delete ${file}`,
    );
    this.name = 'DataDirLockedError';
  }
}

export interface DataDirLock {
  file: string;
  release(): void;
}

function isAlive(pid: number): boolean {
  // A lock written by this very process is from an earlier run that reused our PID (PID 1 in containers).
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readHolder(file: string): LockHolder | undefined {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<LockHolder>;
    if (typeof parsed.pid !== 'number') return undefined;
    return {
      pid: parsed.pid,
      owner: String(parsed.owner ?? 'unknown'),
      startedAt: String(parsed.startedAt ?? '?'),
    };
  } catch {
    return undefined;
  }
}

/** Takes DATA_DIR's lock or throws DataDirLockedError naming the live holder. Released on release() or exit. */
export function acquireDataDirLock(dataDir: string, owner: string): DataDirLock {
  mkdirSync(dataDir, { recursive: true });
  const file = path.resolve(dataDir, LOCK_FILE_NAME);
  const holder: LockHolder = { pid: process.pid, owner, startedAt: new Date().toISOString() };
  for (let attempt = 0; ; attempt++) {
    try {
      // wx: create exclusively, so two processes starting at once cannot both win.
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, JSON.stringify(holder));
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 2) throw err;
      const current = readHolder(file);
      // A half-written file (the holder is between open and write) reads as undefined: give it a moment.
      if (current === undefined && attempt === 0) {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
        if (readHolder(file) === undefined) rmSync(file, { force: true });
        continue;
      }
      if (current && isAlive(current.pid)) throw new DataDirLockedError(file, current);
      rmSync(file, { force: true });
    }
  }
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    process.off('exit', release);
    // Only our own lock: never delete one another process took over.
    if (readHolder(file)?.pid === process.pid) rmSync(file, { force: true });
  };
  // A crash or process.exit() without close still removes it (a kill -9 leaves it; the PID check handles that).
  process.on('exit', release);
  return { file, release };
}
