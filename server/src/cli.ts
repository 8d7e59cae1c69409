// Operator commands: `migrate` (run pending migrations under the advisory lock) and `create-admin` (a verified
// administrator with a password). Usage: npm run cli -- <command> [options].
import { parseArgs } from 'node:util';
import { eq } from 'drizzle-orm';
import { createAuth, hashPassword } from './auth/auth.js';
import { createRevocation, type Revocation } from './auth/revocation.js';
import { type Config, ConfigError, loadConfig } from './config.js';
import { createStore } from './infra/cache.js';
import { createDatabase, type Database } from './infra/db.js';
import type { Logger } from './infra/logger.js';
import { createMailer } from './infra/mailer.js';
import { user as userTable } from './infra/schema/index.js';
import { runRetention } from './notifications/retention.js';

const USAGE = `Usage:
  npm run cli -- migrate
  npm run cli -- create-admin --email <email> --password <password> [--name <name>]
  npm run cli -- retention`;

export class CliError extends Error {}

/** A console-backed logger with the pino method shape the infra factories expect. */
function consoleLogger(): Logger {
  const write =
    (level: string) =>
    (...args: unknown[]) => {
      const text = args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' ');
      process.stderr.write(`${level}: ${text}\n`);
    };
  const noop = () => {};
  const logger = {
    level: 'info',
    fatal: write('fatal'),
    error: write('error'),
    warn: write('warn'),
    info: noop,
    debug: noop,
    trace: noop,
    silent: noop,
    child: () => logger,
  };
  return logger as unknown as Logger;
}

export async function migrate(config: Config): Promise<void> {
  const database = createDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
  try {
    await database.migrate();
  } finally {
    await database.close();
  }
}

export interface CreateAdminInput {
  email: string;
  password: string;
  name?: string;
}

/** Creates a verified admin, or promotes, verifies and re-passwords an existing account with that email. */
export async function createAdmin(
  config: Config,
  input: CreateAdminInput,
  deps: { database?: Database; logger?: Logger } = {},
): Promise<{ id: string; created: boolean }> {
  const email = input.email.trim().toLowerCase();
  if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email))
    throw new CliError(`--email: "${input.email}" is not an email address`);
  if (input.password.length < 8 || input.password.length > 128) {
    throw new CliError('--password: must be 8 to 128 characters long');
  }
  const logger = deps.logger ?? consoleLogger();
  const database =
    deps.database ?? createDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
  const store = createStore({ url: config.CACHE_URL, prefix: config.CACHE_KEY_PREFIX });
  const mailer = createMailer({
    port: config.SMTP_PORT,
    secure: false,
    from: config.SMTP_FROM,
    isProduction: config.isProduction,
    logger,
  });
  const revocations: Revocation[] = [];
  try {
    await database.migrate();
    const revocation = createRevocation({ store, db: database.db, logger });
    revocations.push(revocation);
    const auth = createAuth({ config, db: database.db, store, mailer, logger, revocation });
    const ctx = await auth.$context;
    const hash = await hashPassword(input.password);
    const existing = await ctx.internalAdapter.findUserByEmail(email, { includeAccounts: true });
    if (existing) {
      const id = existing.user.id;
      // internalAdapter.updateUser also refreshes the user snapshot kept with live sessions in the store.
      await ctx.internalAdapter.updateUser(id, { role: 'admin', emailVerified: true });
      const credential = existing.accounts.find((a) => a.providerId === 'credential');
      if (credential) await ctx.internalAdapter.updatePassword(id, hash);
      else
        await ctx.internalAdapter.linkAccount({
          userId: id,
          providerId: 'credential',
          accountId: id,
          password: hash,
        });
      return { id, created: false };
    }
    const user = await ctx.internalAdapter.createUser(
      {
        email,
        name: input.name ?? email.split('@')[0] ?? 'admin',
        emailVerified: true,
        role: 'admin',
      },
      { method: 'admin' },
    );
    await ctx.internalAdapter.linkAccount({
      userId: user.id,
      providerId: 'credential',
      accountId: user.id,
      password: hash,
    });
    // Belt and braces: role is an admin-plugin field that createUser may default.
    await database.db.update(userTable).set({ role: 'admin' }).where(eq(userTable.id, user.id));
    return { id: user.id, created: true };
  } finally {
    for (const r of revocations) r.close();
    mailer.close();
    await store.close();
    if (!deps.database) await database.close();
  }
}

export async function runCli(argv: string[], env: Record<string, string | undefined>): Promise<string> {
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help') return USAGE;
  const config = loadConfig(env);
  if (command === 'migrate') {
    await migrate(config);
    return 'migrations applied';
  }
  if (command === 'retention') {
    // One notification housekeeping run now (the same job every instance runs on RETENTION_INTERVAL_MS).
    const database = createDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR });
    const store = createStore({ url: config.CACHE_URL, prefix: config.CACHE_KEY_PREFIX });
    try {
      await database.migrate();
      const r = await runRetention({ config, database, store, logger: consoleLogger() });
      return r.ran
        ? `retention: ${r.expiredDeleted} expired and ${r.overflowDeleted} over-limit notifications deleted`
        : 'retention: another instance is running it; nothing done';
    } finally {
      await store.close();
      await database.close();
    }
  }
  if (command === 'create-admin') {
    let values: { email?: string; password?: string; name?: string };
    try {
      ({ values } = parseArgs({
        args: rest,
        options: { email: { type: 'string' }, password: { type: 'string' }, name: { type: 'string' } },
        strict: true,
      }));
    } catch (err) {
      throw new CliError(`${(err as Error).message}\n${USAGE}`);
    }
    if (!values.email || !values.password)
      throw new CliError(`--email and --password are required\n${USAGE}`);
    const result = await createAdmin(config, {
      email: values.email,
      password: values.password,
      name: values.name,
    });
    return result.created
      ? `created admin ${values.email.toLowerCase()} (${result.id})`
      : `promoted existing user ${values.email.toLowerCase()} (${result.id}) to admin and set its password`;
  }
  throw new CliError(`unknown command "${command}"\n${USAGE}`);
}

const isEntry =
  process.argv[1] !== undefined && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isEntry) {
  runCli(process.argv.slice(2), process.env).then(
    (message) => {
      process.stdout.write(`${message}\n`);
      process.exit(0);
    },
    (err: unknown) => {
      if (err instanceof ConfigError || err instanceof CliError) process.stderr.write(`${err.message}\n`);
      else
        process.stderr.write(
          `cli failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
        );
      process.exit(1);
    },
  );
}
