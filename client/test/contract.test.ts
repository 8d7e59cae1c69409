// client/src/contract.ts is generated from the server's wire types (scripts/gen-contract.mjs): it must equal what
// the server's schemas generate now, so the SDK's types and constants can never drift from the server.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
// @ts-expect-error a plain .mjs script without declarations
import { generateContract, OUTPUT } from '../scripts/gen-contract.mjs';

describe('generated contract', () => {
  it('src/contract.ts equals what server/src/contract.ts generates (run `npm run gen:contract -w client`)', () => {
    const generated = (generateContract as () => string)();
    expect(readFileSync(OUTPUT as string, 'utf8')).toBe(generated);
    // Plain declarations: nothing imported (no server, no zod), no `any`.
    expect(generated).not.toMatch(/^import /m);
    expect(generated).not.toMatch(/\bany\b/);
  }, 120_000);
});
