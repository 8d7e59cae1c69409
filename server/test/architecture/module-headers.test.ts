// The comment rule of DESIGN.md §4 ("a short header per module saying what it owns"), enforced for the source of
// the server, the SDK and the web app: each module opens with a comment (app.ts had lost its header unnoticed).
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../../..', import.meta.url));

function modules(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return ['migrations', 'node_modules', 'dist'].includes(e.name) ? [] : modules(full);
    return /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts') ? [full] : [];
  });
}

describe('architecture: every module says what it owns', () => {
  it('each module of server/src, client/src and web/src opens with a header comment', () => {
    const files = ['server/src', 'client/src', 'web/src'].flatMap((d) => modules(path.join(REPO, d)));
    expect(files.length).toBeGreaterThan(100);
    const bare = files
      .filter((f) => !/^(\/\/|\/\*)/.test(readFileSync(f, 'utf8')))
      .map((f) => path.relative(REPO, f));
    expect(bare).toEqual([]);
  });
});
