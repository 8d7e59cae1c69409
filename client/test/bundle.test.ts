// The SDK's JavaScript must not pull server code in: `@herald/server/contract` is for types only.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

const SRC = new URL('../src/', import.meta.url).pathname;

describe('no server code at run time', () => {
  it('every import of @herald/server in the sources is type-only', () => {
    for (const file of readdirSync(SRC)) {
      const text = readFileSync(join(SRC, file), 'utf8');
      for (const m of text.matchAll(/^(import|export)\s+([^;]*?)\s+from\s+'@herald\/server[^']*'/gms)) {
        expect(m[2]?.trim().startsWith('type'), `${file}: ${m[0].slice(0, 60)}`).toBe(true);
      }
    }
  });

  it('a bundle of both entry points contains no file of the server workspace', async () => {
    const result = await build({
      stdin: {
        contents: "export * from './src/index.ts';\nexport * from './src/react.tsx';",
        loader: 'tsx',
        resolveDir: new URL('..', import.meta.url).pathname,
      },
      bundle: true,
      format: 'esm',
      write: false,
      metafile: true,
      external: ['react', 'react/jsx-runtime'],
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.some((p) => p.includes('src/feed.ts'))).toBe(true);
    expect(inputs.filter((p) => /(^|\/)server\/|@herald\/server/.test(p))).toEqual([]);
    expect(result.outputFiles[0]?.text).not.toContain('@herald/server');
  });
});
