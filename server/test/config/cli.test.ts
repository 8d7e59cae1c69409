// The operator CLI as operators run it (child processes): the admin password from standard input or
// HERALD_ADMIN_PASSWORD (--password still works, with a warning), no silent adoption of someone else's unverified
// account, and, on the embedded database, a refusal while a server holds DATA_DIR's lock.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { LOCK_FILE_NAME } from '../../src/infra/data-dir-lock.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { jsonHeaders, signIn, uniqueEmail } from '../helpers/users.js';

const SERVER_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

async function cli(
  args: string[],
  env: Record<string, string>,
  stdin?: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], {
    cwd: SERVER_DIR,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  child.stdin.end(stdin ?? '');
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { code, stdout, stderr };
}

describe('create-admin on PostgreSQL', () => {
  let env: TestEnv;
  let app: App;
  let cliEnv: Record<string, string>;
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app();
    cliEnv = {
      DATABASE_URL: env.db.url,
      CACHE_URL: env.baseEnv.CACHE_URL ?? '',
      CACHE_KEY_PREFIX: env.prefix,
      AUTH_SECRET: env.baseEnv.AUTH_SECRET ?? '',
      NODE_ENV: 'test',
    };
  });
  afterAll(() => env.close());

  it('reads the password from standard input (one line), never from the command line', async () => {
    const email = uniqueEmail('stdin-admin');
    const r = await cli(['create-admin', '--email', email], cliEnv, 'piped password 123\n');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`created admin ${email}`);
    expect(r.stderr).not.toContain('warning');
    expect(await signIn(app, email, 'piped password 123')).toBeTruthy();
  });

  it('reads HERALD_ADMIN_PASSWORD; --password still works but warns that it is visible', async () => {
    const fromEnv = uniqueEmail('env-admin');
    const a = await cli(['create-admin', '--email', fromEnv], {
      ...cliEnv,
      HERALD_ADMIN_PASSWORD: 'env password 123',
    });
    expect(a.code, a.stderr).toBe(0);
    expect(await signIn(app, fromEnv, 'env password 123')).toBeTruthy();

    const fromFlag = uniqueEmail('flag-admin');
    const b = await cli(['create-admin', '--email', fromFlag, '--password', 'flag password 123'], cliEnv);
    expect(b.code, b.stderr).toBe(0);
    expect(b.stderr).toMatch(/warning: --password is visible .*process list.*history/);
    expect(await signIn(app, fromFlag, 'flag password 123')).toBeTruthy();
  });

  // Three CLI processes in a row: more time than the default on a loaded machine.
  it('NODE_ENV=production: each command asks only for what it uses (create-admin: DATABASE_URL alone)', {
    timeout: 180_000,
  }, async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'herald-cli-prod-'));
    try {
      const email = uniqueEmail('prod-admin');
      const prodEnv = { NODE_ENV: 'production', DATABASE_URL: env.db.url, DATA_DIR: dataDir };
      const r = await cli(['create-admin', '--email', email], {
        ...prodEnv,
        HERALD_ADMIN_PASSWORD: 'prod password 123',
      });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).not.toMatch(/CACHE_URL|AUTH_SECRET|API_BASE_URL|FE_BASE_URL/);
      expect(await signIn(app, email, 'prod password 123')).toBeTruthy();
      // No development secret file is written next to a production deployment.
      expect(existsSync(path.join(dataDir, 'auth-secret'))).toBe(false);

      const migrate = await cli(['migrate'], { NODE_ENV: 'production', DATA_DIR: dataDir });
      expect(migrate.code).toBe(1);
      expect(migrate.stderr).toContain('DATABASE_URL: required when NODE_ENV=production');
      expect(migrate.stderr).not.toMatch(/CACHE_URL|AUTH_SECRET|API_BASE_URL|FE_BASE_URL/);

      // Retention takes its cluster-wide lock in the store: it asks for CACHE_URL, still not for the others.
      const retention = await cli(['retention'], prodEnv);
      expect(retention.code).toBe(1);
      expect(retention.stderr).toContain('CACHE_URL: required when NODE_ENV=production');
      expect(retention.stderr).not.toMatch(/AUTH_SECRET|API_BASE_URL|FE_BASE_URL/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('no password anywhere → a clear error, exit code 1', async () => {
    const r = await cli(['create-admin', '--email', uniqueEmail('nopass')], cliEnv);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no password.*HERALD_ADMIN_PASSWORD/);
  });

  it('refuses to adopt an unverified account someone else registered with that email', async () => {
    const email = uniqueEmail('squatter');
    const signUp = await app.inject({
      method: 'POST',
      url: '/auth/sign-up/email',
      headers: jsonHeaders(),
      payload: { email, password: 'squatter password', name: 'Squatter' },
    });
    expect(signUp.statusCode).toBe(200);
    const r = await cli(['create-admin', '--email', email], cliEnv, 'owner password 123\n');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/refused: an unverified account with .* already exists/);
    const row = await app.ctx.auth.$context.then((c) => c.internalAdapter.findUserByEmail(email));
    expect(row?.user.emailVerified).toBe(false);
    expect((row?.user as { role?: string } | undefined)?.role).not.toBe('admin');
  });
});

describe('the embedded database is one process at a time', { timeout: 180_000 }, () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'herald-cli-lock-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
  const embeddedEnv = { NODE_ENV: 'test', LOG_LEVEL: 'silent', DATA_DIR: dataDir };
  const cliEnv = { ...embeddedEnv, HERALD_ADMIN_PASSWORD: 'embedded password 1' };

  it('CLI commands refuse while a server holds DATA_DIR; after it stops the admin is created and kept', async () => {
    const server = await buildApp(loadConfig(embeddedEnv));
    const lockFile = path.join(dataDir, LOCK_FILE_NAME);
    try {
      expect(existsSync(lockFile)).toBe(true);
      const email = uniqueEmail('embedded-admin');
      const refused = await cli(['create-admin', '--email', email], cliEnv);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/in use by server \(pid \d+/);
      expect(refused.stderr).toMatch(/Stop the server/);
      expect(refused.stderr).toMatch(/ADMIN_EMAILS=/);
      for (const command of ['migrate', 'retention']) {
        const r = await cli([command], cliEnv);
        expect(r.code, command).toBe(1);
        expect(r.stderr).toMatch(/Stop the server/);
      }
    } finally {
      await server.close();
    }
    // Closing the server removed its lock.
    expect(existsSync(lockFile)).toBe(false);

    const email = uniqueEmail('embedded-admin');
    const created = await cli(['create-admin', '--email', email], cliEnv);
    expect(created.code, created.stderr).toBe(0);
    expect(existsSync(lockFile)).toBe(false);
    // The admin survived: a server started afterwards sees it.
    const again = await buildApp(loadConfig(embeddedEnv));
    try {
      const ctx = await again.ctx.auth.$context;
      const found = await ctx.internalAdapter.findUserByEmail(email);
      expect((found?.user as { role?: string } | undefined)?.role).toBe('admin');
    } finally {
      await again.close();
    }
  });

  it('a lock left by a dead process (crash, kill -9) is taken over', async () => {
    // A PID that certainly is not running any more: a child that has exited.
    const child = spawn(process.execPath, ['-e', '0']);
    const deadPid = child.pid ?? 0;
    await new Promise((resolve) => child.on('exit', resolve));
    writeFileSync(
      path.join(dataDir, LOCK_FILE_NAME),
      JSON.stringify({ pid: deadPid, owner: 'server', startedAt: new Date().toISOString() }),
    );
    const r = await cli(['migrate'], cliEnv);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('migrations applied');
    expect(existsSync(path.join(dataDir, LOCK_FILE_NAME))).toBe(false);
  });
});
