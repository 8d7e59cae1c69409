// The migration snapshots stay usable (docs/architecture.md, "Schema changes and migrations"): drizzle-kit diffs
// the schema files against the last snapshot in src/infra/migrations/meta/ to write the next migration, and refuses
// to run at all when two snapshots name the same parent (`prevId`). Parallel branches that each generated "their"
// next migration from the same parent broke that once (0008 and 0010–0014 all pointed at 0007), and the hand-written
// 0015 snapshot did not describe the schema, so `npm run db:generate` could not be used. Two checks:
// - the chain: one snapshot per journal entry, unique ids, each prevId the previous entry's id;
// - drizzle-kit itself, run on a copy of the migrations folder against the current schema, finds nothing to
//   migrate: the last snapshot is exactly what the schema files describe (a schema change without its migration,
//   or a hand-edited snapshot, fails here).
// The SQL files and the journal are what the migrator runs and records; the snapshots are only drizzle-kit's.
import { spawn } from 'node:child_process';
import { cp, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import drizzleConfig from '../../drizzle.config.js';

const SERVER = fileURLToPath(new URL('../..', import.meta.url));
const MIGRATIONS = path.join(SERVER, 'src/infra/migrations');
const ZERO_ID = '00000000-0000-0000-0000-000000000000';

interface Journal {
  entries: Array<{ idx: number; tag: string }>;
}
interface Snapshot {
  id: string;
  prevId: string;
}

async function readJson<T>(file: string): Promise<T> {
  return JSON.parse(await readFile(file, 'utf8')) as T;
}

/** drizzle-kit's CLI, resolved like any dependency (the workspace's node_modules), run by this same Node. */
function drizzleKitBin(): string {
  const require = createRequire(import.meta.url);
  // The package's entry (index.js) sits next to its bin (package.json's "bin": "./bin.cjs").
  return path.join(path.dirname(require.resolve('drizzle-kit', { paths: [SERVER] })), 'bin.cjs');
}

/** Runs a command to its end; its exit code and everything it printed. No stdin: a prompt (drizzle-kit asks about
 * a possible rename) ends the run at once instead of waiting for an answer. */
function run(args: string[], cwd: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd,
      env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 50_000,
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

/** All files under a folder, relative to it, sorted. */
async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}

describe('drizzle-kit migration snapshots', () => {
  it('form one chain in journal order: unique ids, each prevId the previous snapshot', async () => {
    const journal = await readJson<Journal>(path.join(MIGRATIONS, 'meta/_journal.json'));
    const snapshotFiles = (await readdir(path.join(MIGRATIONS, 'meta'))).filter((f) =>
      f.endsWith('_snapshot.json'),
    );
    expect(snapshotFiles.sort()).toEqual(
      journal.entries.map((e) => `${e.tag.slice(0, e.tag.indexOf('_'))}_snapshot.json`),
    );

    let prevId = ZERO_ID;
    const seen = new Set<string>();
    for (const file of snapshotFiles) {
      const snapshot = await readJson<Snapshot>(path.join(MIGRATIONS, 'meta', file));
      expect({ file, prevId: snapshot.prevId }).toEqual({ file, prevId });
      expect(seen.has(snapshot.id), `${file}: id ${snapshot.id} already used`).toBe(false);
      seen.add(snapshot.id);
      prevId = snapshot.id;
    }
  });

  describe('drizzle-kit generate on a copy of the migrations folder', () => {
    let work = '';

    beforeAll(async () => {
      work = await mkdtemp(path.join(os.tmpdir(), 'herald-drizzle-kit-'));
      await cp(MIGRATIONS, path.join(work, 'migrations'), { recursive: true });
    });

    afterAll(async () => {
      if (work) await rm(work, { recursive: true, force: true });
    });

    it('finds no schema change to migrate and writes nothing', async () => {
      const before = await listFiles(work);
      const schemas = [drizzleConfig.schema ?? []].flat();
      expect(schemas.length, 'drizzle.config.ts names the schema').toBeGreaterThan(0);
      // drizzle.config.ts's settings, with --out pointing at the copy. drizzle-kit reads the snapshots through a
      // path it builds as `./${out}/…`, so `out` must be relative: the copy's folder is the working directory.
      const args = [
        drizzleKitBin(),
        'generate',
        `--dialect=${drizzleConfig.dialect}`,
        ...schemas.map((s) => `--schema=${path.resolve(SERVER, s)}`),
        `--casing=${drizzleConfig.casing ?? 'camelCase'}`,
        '--out=./migrations',
        '--name=probe',
      ];
      const { code, output } = await run(args, work);
      // drizzle-kit exits 0 even when it refuses the folder (a snapshot collision), so its output decides too.
      expect(code, output).toBe(0);
      const hint =
        'drizzle-kit generate must find nothing to migrate: a schema change needs its migration ' +
        '(`npm run db:generate -w server -- --name <what>`), and the snapshots one chain ' +
        '(docs/architecture.md, "Schema changes and migrations")';
      expect(output, hint).not.toMatch(/collision|malformed|Error/);
      expect(output, hint).toContain('No schema changes, nothing to migrate');
      expect(await listFiles(work), hint).toEqual(before);
    });
  });
});
