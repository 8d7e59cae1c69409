// The jsonb rule of docs/design/notifications.md ("Lone surrogates (jsonb)"), enforced: JSON reaches PostgreSQL only through
// infra/db.ts `jsonb()` / `storableJson()`, which store lone UTF-16 surrogates as U+FFFD. A bare
// `${JSON.stringify(x)}::jsonb` fails the whole statement (a 500) on the first lone surrogate a client sends.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { storableJson } from '../../src/infra/db.js';

const SRC = fileURLToPath(new URL('../../src', import.meta.url));

function modules(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'migrations' ? [] : modules(full);
    return e.name.endsWith('.ts') ? [full] : [];
  });
}

describe('architecture: JSON goes to PostgreSQL through jsonb()', () => {
  it('no module casts a parameter to jsonb itself (infra/db.ts jsonb() does)', () => {
    const offenders = modules(SRC)
      .filter((f) => path.relative(SRC, f) !== path.join('infra', 'db.ts'))
      .flatMap((f) =>
        readFileSync(f, 'utf8')
          .split('\n')
          .map((line, i) => ({ line, at: `${path.relative(SRC, f)}:${i + 1}` }))
          .filter(({ line }) => /\}\s*::\s*jsonb/.test(line))
          .map(({ at }) => at),
      );
    expect(offenders).toEqual([]);
  });
});

describe('storableJson', () => {
  it('writes lone surrogates (values and keys, any depth) as U+FFFD and leaves everything else as JSON.stringify does', () => {
    const parse = (v: unknown) => JSON.parse(storableJson(v));
    expect(parse({ a: '\ud800', b: ['x\udfffy', { '\udbff': '\udc00\ud800' }] })).toEqual({
      a: '\ufffd',
      b: ['x\ufffdy', { '\ufffd': '\ufffd\ufffd' }],
    });
    // A pair (an emoji) is a character; reversed halves are two lone surrogates.
    expect(parse('\ud83d\ude00 \ude00\ud83d')).toBe('\ud83d\ude00 \ufffd\ufffd');
    // A backslash followed by the text "ud800" is not an escape; an escaped backslash before a lone one is kept.
    expect(parse(['\\ud800', '\\\\ud800', '\\\ud800', '\u001f'])).toEqual([
      '\\ud800',
      '\\\\ud800',
      '\\\ufffd',
      '\u001f',
    ]);
    const plain = { s: 'plain "quoted" \\ text \n', n: 1, z: null, e: '😀' };
    expect(storableJson(plain)).toBe(JSON.stringify(plain));
    expect(storableJson(undefined)).toBe('null');
  });
});
