// readCookie (auth/guard.ts) reads one cookie out of a Cookie header without splitting it: it must answer exactly
// what splitting on `;` and trimming each name and value answers, for every header, including hostile ones.
import { describe, expect, it } from 'vitest';
import { readCookie } from '../../src/auth/guard.js';

/** The reference reading: split on `;`, the first part whose trimmed name matches, its trimmed value decoded. */
function bySplitting(header: string, name: string): string | undefined {
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    try {
      return decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      return undefined;
    }
  }
  return undefined;
}

const NAME = 'better-auth.session_token';

describe('readCookie', () => {
  it('reads the named cookie, the first occurrence winning', () => {
    expect(readCookie(`a=1; ${NAME}=tok%2Fen.sig; b=2`, NAME)).toBe('tok/en.sig');
    expect(readCookie(`${NAME}=first; ${NAME}=second`, NAME)).toBe('first');
    expect(readCookie(`  ${NAME} =  spaced  ;x=1`, NAME)).toBe('spaced');
    expect(readCookie(`x${NAME}=no; ${NAME}_data=no`, NAME)).toBeUndefined();
    expect(readCookie(`a=${NAME}=inside; b=2`, NAME)).toBeUndefined();
    expect(readCookie(`${NAME}=%E0%A4%A`, NAME)).toBeUndefined();
    expect(readCookie('', NAME)).toBeUndefined();
  });

  it('answers as splitting and trimming does, for many generated headers', () => {
    // Pieces that sit next to the name in real and hostile headers: blanks, separators, look-alike names.
    const pieces = [
      NAME,
      `${NAME}_data`,
      `x${NAME}`,
      '=',
      ';',
      ' ',
      '\t',
      '\u00a0',
      '\v',
      'v',
      '%41',
      '%',
      'a=b',
      '.sig',
      `; ${NAME}=`,
    ];
    let seed = 42;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    for (let i = 0; i < 20_000; i++) {
      const length = 1 + Math.floor(random() * 10);
      let header = '';
      for (let j = 0; j < length; j++) header += pieces[Math.floor(random() * pieces.length)];
      expect([header, readCookie(header, NAME)]).toEqual([header, bySplitting(header, NAME)]);
    }
  });
});
