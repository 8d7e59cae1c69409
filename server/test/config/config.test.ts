// Configuration: one schema, actionable errors (one line per problem), aliases and production requirements;
// the process entry exits non-zero with those lines on stderr.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, EnvSchema, loadConfig } from '../../src/config.js';

const SERVER_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dataDir = mkdtempSync(path.join(tmpdir(), 'herald-config-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const base = { DATA_DIR: dataDir };
const SECRET = 's'.repeat(40);

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('defaults to the embedded development setup and keeps a generated secret under DATA_DIR', () => {
    const c = loadConfig(base);
    expect(c.NODE_ENV).toBe('development');
    expect(c.PORT).toBe(3001);
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.CACHE_URL).toBeUndefined();
    expect(c.distributed).toBe(false);
    expect(c.API_BASE_URL).toBe('http://localhost:3001');
    // The bundled web app is served by the service, so its pages (email links) are at the service's URL.
    expect(c.SERVE_WEB_APP).toBe(true);
    expect(c.FE_BASE_URL).toBe('http://localhost:3001');
    expect(c.CORS_ALLOWLISTED_ORIGINS).toEqual(['http://localhost:3001']);
    expect(c.INSTANCE_ID).toMatch(/^api-[0-9a-f-]{36}$/);
    expect(c.AUTH_SECRET.length).toBeGreaterThanOrEqual(32);
    expect(readFileSync(path.join(dataDir, 'auth-secret'), 'utf8')).toBe(c.AUTH_SECRET);
    expect(loadConfig(base).AUTH_SECRET).toBe(c.AUTH_SECRET);
  });

  it('defaults FE_BASE_URL to a separate front end when the service does not serve the web app', () => {
    const off = loadConfig({ ...base, SERVE_WEB_APP: 'false' });
    expect(off.FE_BASE_URL).toBe('http://localhost:3000');
    expect(off.CORS_ALLOWLISTED_ORIGINS).toEqual(['http://localhost:3000']);
    const served = loadConfig({ ...base, PORT: '4100' });
    expect(served.FE_BASE_URL).toBe('http://localhost:4100');
    const elsewhere = loadConfig({ ...base, FE_BASE_URL: 'https://app.example/' });
    expect(elsewhere.FE_BASE_URL).toBe('https://app.example');
    expect(elsewhere.CORS_ALLOWLISTED_ORIGINS).toEqual(['https://app.example']);
  });

  it('trims CORS origins and strips quotes', () => {
    const c = loadConfig({
      ...base,
      CORS_ALLOWLISTED_ORIGINS: ` "https://a.example" ,'https://b.example',, https://c.example `,
    });
    expect(c.CORS_ALLOWLISTED_ORIGINS).toEqual([
      'https://a.example',
      'https://b.example',
      'https://c.example',
    ]);
  });

  it('reduces CORS entries to the origin browsers send and refuses anything else', () => {
    const c = loadConfig({
      ...base,
      CORS_ALLOWLISTED_ORIGINS:
        'https://App.Example/,https://a.example:443,http://b.example:8080,https://app.example',
    });
    expect(c.CORS_ALLOWLISTED_ORIGINS).toEqual([
      'https://app.example',
      'https://a.example',
      'http://b.example:8080',
    ]);
    const bad = [
      '*',
      'app.example',
      'https://app.example/path',
      'https://fe.example@evil.example',
      'ftp://x.example',
    ];
    expect(problemsOf({ ...base, CORS_ALLOWLISTED_ORIGINS: bad.join(',') })).toEqual(
      bad.map(
        (entry) =>
          `CORS_ALLOWLISTED_ORIGINS: "${entry}" is not an origin (expected http(s)://host[:port], no path)`,
      ),
    );
  });

  it('accepts FRONTEND_URL as an alias of FE_BASE_URL and refuses two different values', () => {
    expect(loadConfig({ ...base, FRONTEND_URL: 'https://app.example/' }).FE_BASE_URL).toBe(
      'https://app.example',
    );
    expect(loadConfig({ ...base, FE_BASE_URL: 'https://fe.example' }).FE_BASE_URL).toBe('https://fe.example');
    expect(
      problemsOf({ ...base, FE_BASE_URL: 'https://a.example', FRONTEND_URL: 'https://b.example' }),
    ).toEqual(['FE_BASE_URL and FRONTEND_URL are both set and differ; set only one']);
  });

  it('refuses a METRICS_API_KEY shorter than 32 characters', () => {
    expect(problemsOf({ ...base, METRICS_API_KEY: 'short' })).toEqual([
      'METRICS_API_KEY: METRICS_API_KEY must be at least 32 characters long',
    ]);
    expect(loadConfig({ ...base, METRICS_API_KEY: 'k'.repeat(32) }).METRICS_API_KEY).toBe('k'.repeat(32));
  });

  it('requires the contract variables in production, all reported at once', () => {
    expect(problemsOf({ ...base, NODE_ENV: 'production' })).toEqual([
      'DATABASE_URL: required when NODE_ENV=production',
      'CACHE_URL: required when NODE_ENV=production',
      'AUTH_SECRET: required when NODE_ENV=production',
      'API_BASE_URL: required when NODE_ENV=production',
      'FE_BASE_URL: required when NODE_ENV=production (or its alias FRONTEND_URL)',
    ]);
    // Invalid values and missing ones are reported together.
    const mixed = problemsOf({ ...base, NODE_ENV: 'production', PORT: 'abc', CACHE_URL: 'http://x' });
    expect(mixed).toContain('PORT: expected an integer between 0 and 65535, got "abc"');
    expect(mixed).toContain('CACHE_URL: CACHE_URL must start with redis:// or rediss://');
    expect(mixed).toContain('DATABASE_URL: required when NODE_ENV=production');
    expect(mixed).not.toContain('CACHE_URL: required when NODE_ENV=production');
    const ok = loadConfig({
      ...base,
      NODE_ENV: 'production',
      DATABASE_URL: 'postgres://db/herald',
      CACHE_URL: 'redis://cache:6379',
      AUTH_SECRET: SECRET,
      API_BASE_URL: 'https://api.example',
      FRONTEND_URL: 'https://app.example',
    });
    expect(ok.isProduction).toBe(true);
    expect(ok.distributed).toBe(true);
  });

  it('reports one line per invalid variable', () => {
    const problems = problemsOf({
      ...base,
      PORT: '70000',
      LOG_LEVEL: 'loud',
      DATABASE_URL: 'mysql://x',
      ENABLE_DISTRIBUTED_CHAT: 'maybe',
      AUTH_SECRET: 'short',
      API_BASE_URL: 'ftp://x',
      TRUST_PROXY: 'sometimes',
      SOCIAL_PROVIDER: 'Not An Id',
    });
    expect(problems.map((p) => p.split(':')[0])).toEqual([
      'PORT',
      'LOG_LEVEL',
      'DATABASE_URL',
      'ENABLE_DISTRIBUTED_CHAT',
      'AUTH_SECRET',
      'API_BASE_URL',
      'SOCIAL_PROVIDER',
      'TRUST_PROXY',
    ]);
  });

  it('validates social provider settings', () => {
    expect(problemsOf({ ...base, SOCIAL_CLIENT_ID: 'id' })).toEqual([
      'SOCIAL_CLIENT_ID and SOCIAL_CLIENT_SECRET must be set together',
      expect.stringContaining('SOCIAL_ISSUER: required for the generic OpenID Connect provider "oidc"'),
    ]);
    expect(
      loadConfig({ ...base, SOCIAL_PROVIDER: 'github', SOCIAL_CLIENT_ID: 'a', SOCIAL_CLIENT_SECRET: 'b' })
        .SOCIAL_PROVIDER,
    ).toBe('github');
    expect(
      problemsOf({
        ...base,
        SOCIAL_PROVIDER: 'keycloak',
        SOCIAL_CLIENT_ID: 'a',
        SOCIAL_CLIENT_SECRET: 'b',
      })[0],
    ).toMatch(/SOCIAL_ISSUER: required .*"keycloak"/);
  });

  it('parses lists, booleans and TRUST_PROXY forms', () => {
    const c = loadConfig({
      ...base,
      ADMIN_EMAILS: ' A@Example.test , "b@example.test"',
      ACTION_ALLOWED_DOMAINS: 'Example.COM,example.org',
      ENABLE_DISTRIBUTED_CHAT: 'off',
      TRUST_PROXY: '10.0.0.0/8, 192.168.1.1',
    });
    expect(c.ADMIN_EMAILS).toEqual(['a@example.test', 'b@example.test']);
    expect(c.ACTION_ALLOWED_DOMAINS).toEqual(['example.com', 'example.org']);
    expect(c.ENABLE_DISTRIBUTED_CHAT).toBe(false);
    for (const v of ['true', 'false', '2', '::1', '10.0.0.1,10.0.0.2']) {
      expect(loadConfig({ ...base, TRUST_PROXY: v }).TRUST_PROXY).toBe(v);
    }
  });

  it('sanitises INSTANCE_ID and requires SameSite=None to go with https', () => {
    expect(loadConfig({ ...base, INSTANCE_ID: ' api/1 <x> ' }).INSTANCE_ID).toBe('api-1--x');
    expect(problemsOf({ ...base, COOKIE_SAME_SITE: 'none', API_BASE_URL: 'http://api.example' })[0]).toMatch(
      /^COOKIE_SAME_SITE:/,
    );
  });

  it('every schema key is documented in docs/configuration.md and .env.example', () => {
    const root = path.resolve(SERVER_DIR, '..');
    const readme = readFileSync(path.join(root, 'docs', 'configuration.md'), 'utf8');
    const example = readFileSync(path.join(root, '.env.example'), 'utf8');
    const keys = Object.keys(EnvSchema.shape);
    const undocumented = keys.filter((k) => !readme.includes(`| \`${k}\``));
    const missingExample = keys.filter((k) => !new RegExp(`^#? ?${k}=`, 'm').test(example));
    expect(undocumented).toEqual([]);
    expect(missingExample).toEqual([]);
  });
});

describe('process entry with a bad environment', () => {
  it('prints one line per problem and exits non-zero', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      cwd: SERVER_DIR,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        DATA_DIR: dataDir,
        NODE_ENV: 'production',
        PORT: 'not-a-port',
        METRICS_API_KEY: 'too-short',
        CORS_ALLOWLISTED_ORIGINS: 'https://a.example',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(1);
    const lines = stderr
      .split('\n')
      .filter((l) => l.startsWith('  - '))
      .map((l) => l.slice(4));
    expect(stderr).toContain('Invalid configuration:');
    expect(lines).toEqual([
      'PORT: expected an integer between 0 and 65535, got "not-a-port"',
      'METRICS_API_KEY: METRICS_API_KEY must be at least 32 characters long',
      'DATABASE_URL: required when NODE_ENV=production',
      'CACHE_URL: required when NODE_ENV=production',
      'AUTH_SECRET: required when NODE_ENV=production',
      'API_BASE_URL: required when NODE_ENV=production',
      'FE_BASE_URL: required when NODE_ENV=production (or its alias FRONTEND_URL)',
    ]);
  });
});
