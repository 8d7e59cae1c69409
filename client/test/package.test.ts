// The SDK as an app gets it from a registry: build, `npm pack`, install the tarball into an empty project outside
// the repository, typecheck a file against the installed declarations (strict, skipLibCheck false, both module
// resolutions apps use), and load the package in Node 24 and Node 20. This is what proves the declarations are
// self-contained (nothing of the unpublished server) and real types (a `@ts-expect-error` that is unused when a
// type collapses to `any` fails the compile).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const CLIENT = fileURLToPath(new URL('..', import.meta.url));
const TSC = fileURLToPath(new URL('../../node_modules/typescript/bin/tsc', import.meta.url));
/** The system's Node (20 on the machines this runs on); skipped where there is none. */
const NODE_20 = process.env.HERALD_NODE20 ?? '/usr/bin/node';

const CONSUMER = `
import {
  ChatCloseCode,
  createHeraldClient,
  HeraldApiError,
  HttpErrorCode,
  NOTIFICATION_STREAM_EVENTS,
  NOTIFICATION_TYPES,
  type Notification,
  type NotificationType,
} from '@herald/client';
import {
  ChatRoom,
  HeraldProvider,
  NotificationBell,
  NotificationInbox,
  RoomList,
  useUnreadCount,
} from '@herald/client/react';
import { createElement } from 'react';

const client = createHeraldClient({ baseURL: 'http://localhost:3001' });
declare const n: Notification;
export const title: string = n.title;
// @ts-expect-error a Notification's title is a string: this line compiles only if the types were \`any\`
export const wrong: number = n.title;
export const types: readonly NotificationType[] = NOTIFICATION_TYPES;
// @ts-expect-error 'sms' is not a notification type
export const notAType: NotificationType = 'sms';
export const close: 4001 = ChatCloseCode.SESSION_ENDED;
export const events: readonly string[] = NOTIFICATION_STREAM_EVENTS;
export const code: 'RATE_LIMITED' = HttpErrorCode.RATE_LIMITED;
export async function unread(): Promise<number> {
  return client.notifications.unreadCount();
}
export async function firstTitle(): Promise<string | undefined> {
  const page = await client.notifications.list({ filter: 'unread', limit: 5 });
  return page.notifications[0]?.title;
}
export function isHerald(e: unknown): boolean {
  return e instanceof HeraldApiError && e.status === 401;
}
export async function role(): Promise<string | null | undefined> {
  const session = await client.auth.getSession();
  return session.data?.user.role;
}
export const app = createElement(HeraldProvider, {
  client,
  children: [
    createElement(NotificationBell, { key: 'bell' }),
    createElement(NotificationInbox, { key: 'inbox', pageSize: 10 }),
    createElement(ChatRoom, { key: 'chat', roomId: 'general' }),
    createElement(RoomList, { key: 'rooms', onSelectRoom: (id: string) => id.length }),
  ],
});
export type Hook = typeof useUnreadCount;
`;

const SMOKE = `
import * as herald from '@herald/client';
import * as react from '@herald/client/react';
const client = herald.createHeraldClient({ baseURL: 'http://127.0.0.1:9' });
const out = {
  node: process.versions.node,
  calls: typeof client.notifications.list === 'function' && typeof client.chat.send === 'function',
  types: herald.NOTIFICATION_TYPES.length,
  close: herald.ChatCloseCode.SESSION_ENDED,
  events: herald.NOTIFICATION_STREAM_EVENTS.includes('new_notification'),
  components: [react.NotificationBell, react.NotificationInbox, react.ChatRoom, react.RoomList].every((c) => typeof c === 'function'),
  styles: import.meta.resolve('@herald/client/styles.css').endsWith('/dist/styles.css'),
};
client.close();
console.log(JSON.stringify(out));
`;

const tsconfig = (moduleResolution: 'NodeNext' | 'Bundler') =>
  JSON.stringify({
    compilerOptions: {
      target: 'ES2022',
      module: moduleResolution === 'NodeNext' ? 'NodeNext' : 'ESNext',
      moduleResolution,
      lib: ['ES2023', 'DOM', 'DOM.Iterable'],
      types: [],
      jsx: 'react-jsx',
      strict: true,
      skipLibCheck: false,
      noEmit: true,
    },
    files: ['consumer.ts'],
  });

/** An error located in better-auth's own declaration files: a module it imports that cannot be resolved. */
const BETTER_AUTH_OWN =
  /^node_modules\/(@better-auth\/[^/]+|better-auth)\/.*error TS2307: Cannot find module '(node|bun):/;

describe('the packed SDK in an empty project', () => {
  let dir: string;
  const betterAuthErrors = new Set<string>();
  /** Runs the repository's TypeScript on a project of the temporary directory (asynchronously, so two can overlap). */
  const tsc = (project: string) =>
    new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn(process.execPath, [TSC, '-p', project, '--pretty', 'false'], { cwd: dir });
      let output = '';
      child.stdout.on('data', (c: Buffer) => {
        output += c.toString();
      });
      child.stderr.on('data', (c: Buffer) => {
        output += c.toString();
      });
      child.on('close', (code) => resolve({ code, output }));
    });
  const timings: Record<string, number> = {};
  const step = <T>(name: string, work: () => T): T => {
    const started = performance.now();
    try {
      return work();
    } finally {
      timings[name] = Math.round(performance.now() - started);
    }
  };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-client-pack-'));
    step('build', () => execFileSync('npm', ['run', 'build'], { cwd: CLIENT, stdio: 'pipe' }));
    step('pack', () =>
      execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], {
        cwd: CLIENT,
        stdio: 'pipe',
      }),
    );
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
    if (!tarball) throw new Error('npm pack wrote no tarball');
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'consumer', private: true, type: 'module' }),
    );
    // The peer dependencies an app has (React, its types) from the npm cache when it has them.
    step('install', () =>
      execFileSync(
        'npm',
        [
          'install',
          `./${tarball}`,
          'react@19',
          'react-dom@19',
          '@types/react@19',
          '--prefer-offline',
          '--no-audit',
          '--no-fund',
          '--ignore-scripts',
          '--loglevel=error',
        ],
        { cwd: dir, stdio: 'pipe' },
      ),
    );
    writeFileSync(join(dir, 'consumer.ts'), CONSUMER);
    writeFileSync(join(dir, 'smoke.mjs'), SMOKE);
  }, 600_000);

  afterAll(() => {
    console.log(`[package test] ms ${JSON.stringify(timings)}`);
    console.log(
      `[package test] errors inside better-auth's declarations:\n${[...betterAuthErrors].join('\n')}`,
    );
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('ships no server code, and its declarations name no unpublished package', () => {
    const installed = join(dir, 'node_modules/@herald/client');
    const files = readdirSync(join(installed, 'dist'));
    expect(files).toContain('styles.css');
    for (const file of files.filter((f) => f.endsWith('.js') || f.endsWith('.d.ts'))) {
      const text = execFileSync('cat', [join(installed, 'dist', file)], { encoding: 'utf8' });
      expect(text, file).not.toMatch(/@herald\/server|from ['"]zod['"]|import\(["']zod/);
    }
  });

  it('typechecks against the installed declarations (strict, skipLibCheck false; NodeNext and Bundler resolution); the @ts-expect-error lines fail the compile if a type is `any`)', async () => {
    const results = await Promise.all(
      (['NodeNext', 'Bundler'] as const).map(async (resolution) => {
        const project = `tsconfig.${resolution}.json`;
        writeFileSync(join(dir, project), tsconfig(resolution));
        const started = performance.now();
        const out = await tsc(project);
        timings[`tsc ${resolution}`] = Math.round(performance.now() - started);
        return { resolution, ...out };
      }),
    );
    for (const { resolution, output } of results) {
      const errors = output.split('\n').filter((l) => /error TS\d+/.test(l));
      // better-auth's own declarations import modules of runtimes an app may not have types for (node:async_hooks,
      // node:sqlite without @types/node; bun:sqlite always): TS2307 inside better-auth's files, nothing of ours.
      const ours = errors.filter((l) => !BETTER_AUTH_OWN.test(l));
      expect(ours, `${resolution}:\n${output}`).toEqual([]);
      betterAuthErrors.add(errors.filter((l) => BETTER_AUTH_OWN.test(l)).join('\n'));
    }
  }, 600_000);

  const nodes: Array<[string, string]> = [['Node 24 (this process)', process.execPath]];
  if (existsSync(NODE_20)) nodes.push(['Node 20 (the system Node)', NODE_20]);
  it.each(nodes)('loads in %s: import, create a client, read the exported values', (_label, node) => {
    const out = step(`load ${node}`, () => execFileSync(node, ['smoke.mjs'], { cwd: dir, encoding: 'utf8' }));
    const report = JSON.parse(out.trim().split('\n').pop() ?? '{}');
    expect(report).toMatchObject({
      calls: true,
      types: 8,
      close: 4001,
      events: true,
      components: true,
      styles: true,
    });
  });
});
