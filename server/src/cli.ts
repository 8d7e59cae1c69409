// Operator commands: `migrate` (run pending migrations under the advisory lock), `create-admin` (a verified
// administrator with a password) and `retention`. Usage: npm run cli -- <command> [options].
// On the embedded database (no DATABASE_URL) every command takes DATA_DIR's lock first and refuses while a server
// holds it: PGlite is single-process, and a second process's writes would be lost.
import { parseArgs } from 'node:util';
import { broadcastSendRetentionTask } from './admin/sends.js';
import { grantAdminRole } from './auth/accounts.js';
import { createAuth, hashPassword } from './auth/auth.js';
import { createRevocation, type Revocation } from './auth/revocation.js';
import { type Config, ConfigError, loadConfig, type ProductionRequired } from './config.js';
import { digestRetentionTask } from './email/digest.js';
import { createEmailRendererFromConfig } from './email/index.js';
import { idempotencyRetentionTask } from './http/idempotency.js';
import { DataDirLockedError } from './infra/data-dir-lock.js';
import { createDatabase, type Database } from './infra/db.js';
import { createEmailOutbox, emailOutboxRetentionTask } from './infra/email-outbox.js';
import { createHousekeeping } from './infra/housekeeping.js';
import type { Logger } from './infra/logger.js';
import { createMailer } from './infra/mailer.js';
import { createStore } from './infra/store.js';
import { notificationRetentionTask } from './notifications/retention.js';
import { createUnreadCache } from './notifications/unread-cache.js';
import { pushDeliveryRetentionTask } from './push/worker.js';
import { webhookDeliveryRetentionTask } from './webhooks/worker.js';

const USAGE = `Usage:
  npm run cli -- migrate
  npm run cli -- create-admin --email <email> [--name <name>]
      password from HERALD_ADMIN_PASSWORD, else standard input (prompted without echo on a terminal);
      --password <password> still works but is visible in ps and the shell history
  npm run cli -- retention`;

/** Opens the database for a CLI command; on the embedded database that takes DATA_DIR's lock (see header). */
async function openDatabase(config: Config, command: string): Promise<Database> {
  try {
    return await createDatabase({
      databaseUrl: config.DATABASE_URL,
      ...(config.DATABASE_DIRECT_URL ? { directUrl: config.DATABASE_DIRECT_URL } : {}),
      dataDir: config.DATA_DIR,
      lockOwner: `cli ${command}`,
    });
  } catch (err) {
    if (!(err instanceof DataDirLockedError)) throw err;
    throw new CliError(
      `${command}: refused: ${err.message}.\n` +
        'The embedded database (no DATABASE_URL) can be used by one process at a time, and a running server holds it. ' +
        'Stop the server and run the command again' +
        (command === 'create-admin'
          ? ', or, without stopping it, set ADMIN_EMAILS=<email> on the server: that account becomes an admin when it verifies its email or signs in.'
          : '.'),
    );
  }
}

export class CliError extends Error {}

/**
 * What each command needs with NODE_ENV=production (the server needs all of PRODUCTION_REQUIRED): a one-off
 * create-admin must not demand the store, the auth secret or the public URLs it never uses. Retention takes its
 * cluster-wide lock in the store, so it needs CACHE_URL too.
 */
const REQUIRED_IN_PRODUCTION: Record<string, readonly ProductionRequired[]> = {
  migrate: ['DATABASE_URL'],
  'create-admin': ['DATABASE_URL'],
  retention: ['DATABASE_URL', 'CACHE_URL'],
};

/** A console-backed logger with the pino method shape the infra factories expect. */
function consoleLogger(): Logger {
  const write =
    (level: string) =>
    (...args: unknown[]) => {
      const text = args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' ');
      process.stderr.write(`${level}: ${text}\n`);
    };
  const noop = () => {};
  const logger: Logger = {
    level: 'info',
    fatal: write('fatal'),
    error: write('error'),
    warn: write('warn'),
    info: noop,
    debug: noop,
    trace: noop,
    child: () => logger,
  };
  return logger;
}

export async function migrate(config: Config): Promise<void> {
  const database = await openDatabase(config, 'migrate');
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
    throw new CliError('password: must be 8 to 128 characters long');
  }
  const logger = deps.logger ?? consoleLogger();
  const database = deps.database ?? (await openDatabase(config, 'create-admin'));
  const store = createStore({
    url: config.CACHE_URL,
    cluster: config.CACHE_CLUSTER,
    prefix: config.CACHE_KEY_PREFIX,
  });
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
    // Creating an admin sends no email; a queued one would be sent by the next server that drains the outbox.
    const outbox = createEmailOutbox({
      db: database.db,
      mailer,
      logger,
      pollMs: config.EMAIL_QUEUE_POLL_MS,
      maxAttempts: config.EMAIL_MAX_ATTEMPTS,
      retryBaseMs: config.EMAIL_RETRY_BASE_MS,
    });
    const revocation = createRevocation({ store, db: database.db, logger });
    revocations.push(revocation);
    const emails = createEmailRendererFromConfig(config);
    const auth = createAuth({ config, db: database.db, store, outbox, emails, logger, revocation });
    const ctx = await auth.$context;
    const hash = await hashPassword(input.password);
    const existing = await ctx.internalAdapter.findUserByEmail(email, { includeAccounts: true });
    if (existing) {
      const id = existing.user.id;
      // Anyone can sign up with any address; until the address is verified the account (its name, username,
      // linked social accounts, sessions) belongs to whoever registered it, not necessarily to the email's owner.
      // Promoting it would hand admin rights to that person: refuse instead.
      if (!existing.user.emailVerified) {
        throw new CliError(
          `create-admin: refused: an unverified account with ${email} already exists (registered ${existing.user.createdAt.toISOString()}), ` +
            'and it may have been registered by someone else. Verify the address first (follow the verification link ' +
            'sent to it, or sign in to get a new one) and run create-admin again, or delete that account ' +
            '(POST /auth/admin/remove-user as another admin) and run create-admin again.',
        );
      }
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
    await grantAdminRole(database.db, user.id);
    return { id: user.id, created: true };
  } finally {
    for (const r of revocations) r.close();
    mailer.close();
    await store.close();
    if (!deps.database) await database.close();
  }
}

export interface CliIo {
  stdin: NodeJS.ReadStream | NodeJS.ReadableStream;
  stderr: NodeJS.WritableStream;
}

/**
 * The admin password from standard input: one line when piped (`printf '%s\n' "$P" | npm run cli -- create-admin
 * ...`), or typed at a prompt without echo on a terminal, so it never appears in ps output or shell history.
 */
export async function readPassword(io: CliIo): Promise<string> {
  const stdin = io.stdin as NodeJS.ReadStream;
  if (stdin.isTTY && typeof stdin.setRawMode === 'function') {
    io.stderr.write('Admin password (not echoed): ');
    stdin.setRawMode(true);
    stdin.resume();
    stdin.setEncoding('utf8');
    try {
      return await new Promise<string>((resolve, reject) => {
        let typed = '';
        const onData = (chunk: string) => {
          for (const ch of chunk) {
            if (ch === '\r' || ch === '\n') {
              stdin.off('data', onData);
              io.stderr.write('\n');
              resolve(typed);
              return;
            }
            if (ch === '\u0003') {
              stdin.off('data', onData);
              io.stderr.write('\n');
              reject(new CliError('create-admin: cancelled'));
              return;
            }
            if (ch === '\u007f' || ch === '\b') typed = typed.slice(0, -1);
            else typed += ch;
          }
        };
        stdin.on('data', onData);
      });
    } finally {
      stdin.setRawMode(false);
      stdin.pause();
    }
  }
  let data = '';
  for await (const chunk of io.stdin) {
    data += typeof chunk === 'string' ? chunk : (chunk as Buffer).toString('utf8');
    if (data.includes('\n')) break;
  }
  const line = data.split(/\r?\n/)[0] ?? '';
  if (line === '') {
    throw new CliError(
      'create-admin: no password: pipe it on standard input, set HERALD_ADMIN_PASSWORD, or run on a terminal to be prompted',
    );
  }
  return line;
}

export async function runCli(
  argv: string[],
  env: Record<string, string | undefined>,
  io: CliIo = { stdin: process.stdin, stderr: process.stderr },
): Promise<string> {
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help') return USAGE;
  const required = REQUIRED_IN_PRODUCTION[command];
  if (!required) throw new CliError(`unknown command "${command}"\n${USAGE}`);
  const config = loadConfig(env, { required });
  for (const warning of config.warnings) io.stderr.write(`warning: ${warning}\n`);
  if (command === 'migrate') {
    await migrate(config);
    return 'migrations applied';
  }
  if (command === 'retention') {
    // One housekeeping run now: the same tasks every instance runs on RETENTION_INTERVAL_MS (each owner's task,
    // registered by its feature in app.ts; listed here because the CLI builds no app).
    const database = await openDatabase(config, 'retention');
    const store = createStore({
      url: config.CACHE_URL,
      cluster: config.CACHE_CLUSTER,
      prefix: config.CACHE_KEY_PREFIX,
    });
    try {
      await database.migrate();
      const logger = consoleLogger();
      // The counts live in the store: rows deleted here must not leave stale cached counts behind.
      const unread = createUnreadCache({ store, logger, countFromDb: async () => 0 });
      const housekeeping = createHousekeeping({
        db: database.db,
        logger,
        intervalMs: config.RETENTION_INTERVAL_MS,
      });
      for (const task of [
        notificationRetentionTask(config, unread),
        emailOutboxRetentionTask(),
        idempotencyRetentionTask(),
        broadcastSendRetentionTask(),
        digestRetentionTask(),
        webhookDeliveryRetentionTask(),
        pushDeliveryRetentionTask(),
      ]) {
        housekeeping.register(task);
      }
      const r = await housekeeping.runOnce();
      unread.close();
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
    if (!values.email) throw new CliError(`--email is required\n${USAGE}`);
    if (values.password !== undefined) {
      io.stderr.write(
        'warning: --password is visible to other users in the process list and stays in the shell history; ' +
          'prefer HERALD_ADMIN_PASSWORD or standard input\n',
      );
    }
    // The lock first: refusing after the operator typed a password would waste it.
    const database = await openDatabase(config, 'create-admin');
    let result: { id: string; created: boolean };
    try {
      const password = values.password ?? env.HERALD_ADMIN_PASSWORD ?? (await readPassword(io));
      result = await createAdmin(config, { email: values.email, password, name: values.name }, { database });
    } finally {
      await database.close();
    }
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
