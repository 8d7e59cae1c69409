// The layer rules of docs/architecture.md ("Layers"), enforced: every relative import under server/src (type-only
// and dynamic imports included) must follow the part → part matrix below, which only ever points down a floor
// (or sideways where a row says so), and no two modules may import each other, directly or through others.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../../src', import.meta.url));

/** Floors, lowest first; a part may import its own floor only where the matrix names the part. */
const FLOORS = [
  ['config', 'infra'],
  ['http', 'realtime', 'events'],
  ['auth'],
  ['notifications', 'chat', 'api-keys', 'webhooks', 'push', 'email'],
  ['admin', 'ops'],
  ['root'],
] as const;
type Part = (typeof FLOORS)[number][number];

const BASE: Part[] = ['config', 'infra'];
const FLOOR1: Part[] = [...BASE, 'http', 'realtime', 'events'];
const BELOW_FEATURES: Part[] = [...FLOOR1, 'auth'];

/** Who may import whom (besides itself). docs/architecture.md shows the same matrix. */
const ALLOWED: Record<Part, readonly Part[]> = {
  config: ['infra'],
  infra: [],
  http: BASE,
  realtime: BASE,
  events: BASE,
  auth: FLOOR1,
  notifications: BELOW_FEATURES,
  'api-keys': BELOW_FEATURES,
  webhooks: BELOW_FEATURES,
  email: [...BELOW_FEATURES, 'notifications'],
  push: [...BELOW_FEATURES, 'notifications'],
  chat: [...BELOW_FEATURES, 'notifications'],
  admin: [...BELOW_FEATURES, 'notifications', 'api-keys', 'webhooks', 'chat', 'push', 'email'],
  ops: [...BELOW_FEATURES, 'notifications', 'api-keys', 'webhooks', 'chat', 'push', 'email'],
  root: FLOORS.flat().filter((p) => p !== 'root'),
};

const ROOT_FILES = new Set(['app.ts', 'server.ts', 'cli.ts', 'context.ts', 'contract.ts']);

function partOf(file: string): Part {
  const rel = path.relative(SRC, file).split(path.sep);
  if (rel.length === 1) {
    if (rel[0] === 'config.ts') return 'config';
    if (ROOT_FILES.has(rel[0] ?? '')) return 'root';
    throw new Error(`server/src/${rel[0]} belongs to no part: add it to the architecture test and docs`);
  }
  // root/: the composition root's own pieces (front door, infrastructure, API docs), split out of app.ts.
  if (rel[0] === 'root') return 'root';
  const dir = rel[0] as Part;
  if (!FLOORS.some((floor) => (floor as readonly string[]).includes(dir))) {
    throw new Error(`server/src/${dir}/ belongs to no floor: add it to the architecture test and docs`);
  }
  return dir;
}

function floorOf(part: Part): number {
  return FLOORS.findIndex((floor) => (floor as readonly string[]).includes(part));
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'migrations' ? [] : sourceFiles(full);
    return /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** Relative specifiers of static, re-export, side-effect and dynamic imports (comments stripped first). */
function importsOf(source: string): string[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
  const specs = new Set<string>();
  for (const re of [
    /\bfrom\s*['"](\.{1,2}\/[^'"]+)['"]/g,
    /\bimport\s*\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g,
    /^\s*import\s*['"](\.{1,2}\/[^'"]+)['"]/gm,
  ]) {
    for (const m of code.matchAll(re)) specs.add(m[1] as string);
  }
  return [...specs];
}

function resolve(from: string, spec: string): string {
  const target = path.resolve(path.dirname(from), spec).replace(/\.js$/, '.ts');
  return target;
}

const files = sourceFiles(SRC);
const graph = new Map<string, string[]>(
  files.map((f) => [f, importsOf(readFileSync(f, 'utf8')).map((s) => resolve(f, s))]),
);

/** Workspace files outside server/ (sources and tests; never node_modules or build output). */
function workspaceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (['node_modules', 'dist', 'artifacts'].includes(e.name) || e.name.startsWith('.')) return [];
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return workspaceFiles(full);
    return /\.(tsx?|mjs)$/.test(e.name) ? [full] : [];
  });
}

describe('architecture: the test kit is a package', () => {
  it('bench, client and web import the shared helpers as @herald/server/testkit, never by relative path', () => {
    const repo = path.resolve(SRC, '../..');
    const offenders = ['bench', 'client', 'web']
      .flatMap((w) => workspaceFiles(path.join(repo, w)))
      .filter((f) => importsOf(readFileSync(f, 'utf8')).some((s) => s.includes('server/test/')))
      .map((f) => path.relative(repo, f));
    expect(offenders).toEqual([]);
  });
});

describe('architecture: imports follow the floors', () => {
  it('parses the import forms it must see', () => {
    expect(
      importsOf(
        "import type { A } from './a.js';\nexport { b } from '../b.js';\nimport './c.js';\n" +
          "const d = await import('./d.js');\n// import { e } from './e.js';\nimport x from 'fastify';",
      ).sort(),
    ).toEqual(['../b.js', './a.js', './c.js', './d.js']);
  });

  it('every relative import resolves to a file under server/src', () => {
    const missing: string[] = [];
    for (const [file, targets] of graph) {
      for (const t of targets) {
        if (!graph.has(t) && !graph.has(t.replace(/\.ts$/, '.tsx'))) {
          missing.push(`${path.relative(SRC, file)} → ${path.relative(SRC, t)}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it('the matrix itself points down (or sideways on the same floor), never up', () => {
    const up: string[] = [];
    for (const [part, allowed] of Object.entries(ALLOWED) as Array<[Part, readonly Part[]]>) {
      for (const to of allowed) if (floorOf(to) > floorOf(part)) up.push(`${part} → ${to}`);
    }
    expect(up).toEqual([]);
  });

  it('no import leaves the matrix (a climb of a floor, or a sideways step the matrix does not name)', () => {
    const bad: string[] = [];
    for (const [file, targets] of graph) {
      const from = partOf(file);
      for (const t of targets) {
        if (!graph.has(t)) continue;
        const to = partOf(t);
        if (to !== from && !ALLOWED[from].includes(to)) {
          bad.push(`${path.relative(SRC, file)} (${from}) → ${path.relative(SRC, t)} (${to})`);
        }
      }
    }
    expect(bad).toEqual([]);
  });

  it('the real-time core has one door: other parts import realtime/index.ts only (type-only imports included)', () => {
    const door = path.join(SRC, 'realtime', 'index.ts');
    const bad: string[] = [];
    for (const [file, targets] of graph) {
      if (partOf(file) === 'realtime') continue;
      for (const t of targets) {
        if (graph.has(t) && partOf(t) === 'realtime' && t !== door) {
          bad.push(`${path.relative(SRC, file)} → ${path.relative(SRC, t)}`);
        }
      }
    }
    expect(bad).toEqual([]);
  });

  it('no import cycle between modules (type-only imports included)', () => {
    // Tarjan's strongly connected components: any component of more than one file is a cycle.
    let index = 0;
    const idx = new Map<string, number>();
    const low = new Map<string, number>();
    const onStack = new Set<string>();
    const stack: string[] = [];
    const cycles: string[][] = [];
    const visit = (v: string) => {
      idx.set(v, index);
      low.set(v, index);
      index++;
      stack.push(v);
      onStack.add(v);
      for (const w of graph.get(v) ?? []) {
        if (!graph.has(w)) continue;
        if (!idx.has(w)) {
          visit(w);
          low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
        } else if (onStack.has(w)) {
          low.set(v, Math.min(low.get(v) as number, idx.get(w) as number));
        }
      }
      if (low.get(v) === idx.get(v)) {
        const component: string[] = [];
        let w: string | undefined;
        do {
          w = stack.pop() as string;
          onStack.delete(w);
          component.push(path.relative(SRC, w));
        } while (w !== v);
        if (component.length > 1) cycles.push(component.sort());
      }
    };
    for (const f of graph.keys()) if (!idx.has(f)) visit(f);
    expect(cycles).toEqual([]);
  });

  it('no part-level cycle (two parts that import each other through any files)', () => {
    const edges = new Set<string>();
    for (const [file, targets] of graph) {
      for (const t of targets)
        if (graph.has(t) && partOf(t) !== partOf(file)) edges.add(`${partOf(file)}>${partOf(t)}`);
    }
    const mutual = [...edges].filter((e) => {
      const [a, b] = e.split('>');
      return edges.has(`${b}>${a}`);
    });
    expect(mutual).toEqual([]);
  });
});

describe('architecture: declared dependencies', () => {
  const code = (f: string) =>
    readFileSync(f, 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/(^|[^:'"`])\/\/.*$/gm, '$1');

  it('no part decorates the app with a service (features take and return typed dependencies)', () => {
    // decorateRequest (per-request state such as `request.auth`) is fine; `app.decorate(...)` would carry a
    // service between parts behind the compiler's back, with an order only a comment can state.
    const offenders = files.filter((f) => /\.decorate\s*\(/.test(code(f))).map((f) => path.relative(SRC, f));
    expect(offenders).toEqual([]);
  });

  it('only the composition root reads what was wired into the app (`app.ctx`)', () => {
    const offenders = files
      .filter((f) => partOf(f) !== 'root' && /\bctx\s*\./.test(code(f)) && /\bapp\.ctx\b/.test(code(f)))
      .map((f) => path.relative(SRC, f));
    expect(offenders).toEqual([]);
  });

  it('the composition root reads as a wiring diagram (app.ts stays short)', () => {
    const lines = readFileSync(path.join(SRC, 'app.ts'), 'utf8').split('\n').length;
    expect(lines).toBeLessThanOrEqual(240);
  });
});
