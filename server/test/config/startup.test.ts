// Start-up checks: SMTP_PASSWORD (alias SMTP_PASS) reaches nodemailer and an SMTP login is verified at start-up;
// misspelt variables are warned about; the start-up summary never carries a password; a missing pino-pretty
// falls back to JSON logs.
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, startupSummary, unknownVariableWarnings } from '../../src/config.js';
import { canPrettyPrint, loggerOptions } from '../../src/infra/logger.js';
import { checkSmtp, createMailer } from '../../src/infra/mailer.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { captureLogger } from '../helpers/logs.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';
import { createVerifiedUser } from '../helpers/users.js';

const base = { DATA_DIR: '/tmp/herald-startup-test', AUTH_SECRET: 's'.repeat(40) };

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig({ ...base, ...env });
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('SMTP credentials in the configuration', () => {
  it('reads SMTP_PASSWORD, accepts SMTP_PASS as an alias, refuses two different values', () => {
    expect(loadConfig({ ...base, SMTP_USER: 'u', SMTP_PASSWORD: 'p1' }).SMTP_PASSWORD).toBe('p1');
    expect(loadConfig({ ...base, SMTP_USER: 'u', SMTP_PASS: 'p2' }).SMTP_PASSWORD).toBe('p2');
    expect(loadConfig({ ...base, SMTP_USER: 'u', SMTP_PASSWORD: 'p', SMTP_PASS: 'p' }).SMTP_PASSWORD).toBe(
      'p',
    );
    expect(problemsOf({ SMTP_USER: 'u', SMTP_PASSWORD: 'a', SMTP_PASS: 'b' })).toEqual([
      expect.stringMatching(/SMTP_PASSWORD and SMTP_PASS .*differ/),
    ]);
  });

  it('SMTP_USER without a password (or the reverse) stops start-up naming both variables', () => {
    const [userOnly] = problemsOf({ SMTP_USER: 'u' });
    expect(userOnly).toMatch(/SMTP_USER/);
    expect(userOnly).toMatch(/SMTP_PASSWORD/);
    const [passOnly] = problemsOf({ SMTP_PASS: 'p' });
    expect(passOnly).toMatch(/SMTP_USER/);
    expect(passOnly).toMatch(/SMTP_PASSWORD/);
  });
});

describe('SMTP with authentication, end to end', () => {
  let env: TestEnv;
  let smtp: TestSmtp;
  beforeAll(async () => {
    env = await createTestEnv();
    smtp = await startSmtp({ auth: { user: 'herald', pass: 'smtp-secret' } });
  });
  afterAll(async () => {
    await env.close();
    await smtp.close();
  });

  it('SMTP_USER + SMTP_PASSWORD log in: the verification email arrives and verifies', async () => {
    const app = await env.app({
      SMTP_PORT: String(smtp.port),
      SMTP_USER: 'herald',
      SMTP_PASSWORD: 'smtp-secret',
    });
    const user = await createVerifiedUser(app, smtp);
    expect(user.cookie).toBeTruthy();
  });

  it('the start-up check logs in once: a wrong password is a warning naming the cause, not a crash', async () => {
    const good = captureLogger();
    const ok = createMailer({
      host: '127.0.0.1',
      port: smtp.port,
      secure: false,
      user: 'herald',
      pass: 'smtp-secret',
      from: 'x@example.test',
      isProduction: false,
      logger: good.logger,
    });
    expect(await checkSmtp(ok, good.logger, { host: '127.0.0.1', port: smtp.port }, 5_000)).toBe(true);
    ok.close();
    expect(good.lines.some((l) => l.msg === 'SMTP connection verified')).toBe(true);

    const bad = captureLogger();
    const wrong = createMailer({
      host: '127.0.0.1',
      port: smtp.port,
      secure: false,
      user: 'herald',
      pass: 'not-the-password',
      from: 'x@example.test',
      isProduction: false,
      logger: bad.logger,
    });
    expect(await checkSmtp(wrong, bad.logger, { host: '127.0.0.1', port: smtp.port }, 5_000)).toBe(false);
    wrong.close();
    const warning = bad.lines.find((l) => l.level === 40);
    expect(String(warning?.msg)).toMatch(/SMTP check failed .*535.*SMTP_PASSWORD/s);
  });

  it('an SMTP server that never answers is reported after the timeout', async () => {
    // A listening socket that accepts and never greets: the check must not wait for nodemailer's own timeouts.
    const { createServer } = await import('node:net');
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const address = silent.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const log = captureLogger();
    const mailer = createMailer({
      host: '127.0.0.1',
      port,
      secure: false,
      from: 'x@example.test',
      isProduction: false,
      logger: log.logger,
    });
    const started = Date.now();
    expect(await checkSmtp(mailer, log.logger, { host: '127.0.0.1', port }, 300)).toBe(false);
    expect(Date.now() - started).toBeLessThan(3_000);
    mailer.close();
    silent.close();
    expect(String(log.lines.find((l) => l.level === 40)?.msg)).toMatch(/no answer within 300 ms/);
  });
});

describe('misspelt variables', () => {
  it('names the variable each typo probably meant', () => {
    const warnings = unknownVariableWarnings({
      DATABSE_URL: 'postgres://x',
      CORS_ALLOWED_ORIGINS: 'http://a.test',
      SMPT_HOST: 'mail',
      smtp_port: '25',
      SMTP_PASSWROD: 'x',
    });
    expect(warnings).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^DATABSE_URL .*did you mean DATABASE_URL\?/),
        expect.stringMatching(/^CORS_ALLOWED_ORIGINS .*did you mean CORS_ALLOWLISTED_ORIGINS\?/),
        expect.stringMatching(/^SMPT_HOST .*did you mean SMTP_HOST\?/),
        expect.stringMatching(/^smtp_port .*case-sensitive.*SMTP_PORT/),
        expect.stringMatching(/^SMTP_PASSWROD .*did you mean SMTP_PASSWORD\?/),
      ]),
    );
    expect(warnings).toHaveLength(5);
  });

  it('leaves the rest of a real environment alone', () => {
    expect(
      unknownVariableWarnings({
        PATH: '/bin',
        HOME: '/root',
        HOSTNAME: 'box',
        USER: 'root',
        SHELL: '/bin/sh',
        TERM: 'xterm',
        LANG: 'C.UTF-8',
        PWD: '/',
        NODE_OPTIONS: '--enable-source-maps',
        NODE_EXTRA_CA_CERTS: '/ca.pem',
        INIT_CWD: '/',
        npm_config_cache: '/tmp',
        TEST_DATABASE_URL: 'postgres://x',
        HERALD_ADMIN_PASSWORD: 'x',
        DATABASE_URL: 'postgres://x',
      }),
    ).toEqual([]);
  });

  it('reaches the configuration (logged at start-up by the app)', () => {
    expect(loadConfig({ ...base, SMPT_HOST: 'mail' }).warnings).toEqual([
      expect.stringContaining('did you mean SMTP_HOST?'),
    ]);
  });
});

describe('start-up summary', () => {
  it('names database, store, mail mode, CORS and the API reference without any password', () => {
    const config = loadConfig({
      ...base,
      DATABASE_URL: 'postgres://herald:db-pass-123@db.internal:5432/herald',
      CACHE_URL: 'redis://:cache-pass-456@cache.internal:6379',
      SMTP_HOST: 'smtp.example.com',
      SMTP_USER: 'mailer',
      SMTP_PASSWORD: 'smtp-pass-789',
      CORS_ALLOWLISTED_ORIGINS: 'https://app.example.com',
      API_BASE_URL: 'https://api.example.com',
    });
    const { summary, line } = startupSummary(config);
    expect(summary).toEqual({
      open: 'https://api.example.com',
      database: 'postgres db.internal:5432/herald',
      store: 'redis cache.internal:6379',
      mail: 'smtp smtp.example.com:587',
      corsOrigins: ['https://app.example.com'],
      apiReference: 'https://api.example.com/docs',
    });
    const all = `${line} ${JSON.stringify(summary)}`;
    for (const secret of ['db-pass-123', 'cache-pass-456', 'smtp-pass-789', config.AUTH_SECRET]) {
      expect(all).not.toContain(secret);
    }
  });

  it('describes the embedded defaults and the mail mode without SMTP', () => {
    const dev = startupSummary(loadConfig(base)).summary;
    expect(dev.database).toBe('embedded PGlite at /tmp/herald-startup-test/pglite');
    expect(dev.store).toMatch(/^embedded/);
    expect(dev.mail).toMatch(/^log/);
    expect(dev.apiReference).toBe('http://localhost:3001/docs');
    // The start log says which address to open (the bundled web app).
    expect(dev.open).toBe('http://localhost:3001');
    expect(startupSummary(loadConfig(base)).line).toMatch(
      /^Herald ready: open http:\/\/localhost:3001 in a browser; /,
    );
    expect(startupSummary(loadConfig({ ...base, SERVE_WEB_APP: 'false' })).summary.open).toBeNull();
  });
});

describe('trusted origins', () => {
  it('in development, the service is trusted under localhost, 127.0.0.1 and [::1] alike', () => {
    const config = loadConfig(base);
    for (const origin of ['http://localhost:3001', 'http://127.0.0.1:3001', 'http://[::1]:3001']) {
      expect(config.trustedOrigins).toContain(origin);
      expect(config.corsOrigins).toContain(origin);
    }
    // Aliases only of loopback origins, and only of the ports configured.
    const custom = loadConfig({
      ...base,
      CORS_ALLOWLISTED_ORIGINS: 'http://localhost:5173,https://app.example.com',
    });
    expect(custom.corsOrigins).toEqual([
      'http://localhost:5173',
      'https://app.example.com',
      'http://127.0.0.1:5173',
      'http://[::1]:5173',
    ]);
    expect(custom.trustedOrigins).toContain('http://127.0.0.1:3001');
    expect(custom.trustedOrigins).not.toContain('http://127.0.0.1:3000');
  });

  it('in production, exactly what is configured (no aliases)', () => {
    const config = loadConfig({
      ...base,
      NODE_ENV: 'production',
      DATABASE_URL: 'postgres://db.internal/herald',
      CACHE_URL: 'redis://cache.internal:6379',
      API_BASE_URL: 'http://localhost:3001',
      FE_BASE_URL: 'http://localhost:3001',
    });
    expect(config.trustedOrigins).toEqual(['http://localhost:3001']);
    expect(config.corsOrigins).toEqual(['http://localhost:3001']);
  });
});

describe('logger without pino-pretty', () => {
  it('falls back to JSON when pino-pretty cannot be resolved', () => {
    const missing = (id: string): string => {
      throw Object.assign(new Error(`Cannot find module '${id}'`), { code: 'MODULE_NOT_FOUND' });
    };
    expect(canPrettyPrint(missing)).toBe(false);
    const options = loggerOptions('info', true, missing);
    expect(options.transport).toBeUndefined();
    // The options build a working logger (with the transport, pino would throw for the missing module).
    const lines: string[] = [];
    const logger = pino(
      options,
      new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    );
    logger.info('hello');
    expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({ msg: 'hello' });
    // Installed (as in development): pretty.
    expect(canPrettyPrint()).toBe(true);
    expect(loggerOptions('info', true).transport).toBeDefined();
  });
});
