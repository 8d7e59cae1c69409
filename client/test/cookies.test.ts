import { describe, expect, it } from 'vitest';
import { createCookieFetch } from '../src/index.js';

describe('createCookieFetch', () => {
  it('keeps Set-Cookie answers, sends them back with the Origin, and forgets expired cookies', async () => {
    const sent: Headers[] = [];
    const answers = [
      ['a=1; Path=/; HttpOnly', 'b=2; Max-Age=3600'],
      ['a=3; Path=/', 'b=; Max-Age=0'],
      ['c=4; Expires=Thu, 01 Jan 1970 00:00:00 GMT'],
      [],
    ];
    const jar = createCookieFetch({
      origin: 'http://localhost:3000',
      fetch: async (_input, init) => {
        sent.push(new Headers(init?.headers));
        const headers = new Headers();
        for (const c of answers[sent.length - 1] ?? []) headers.append('set-cookie', c);
        return new Response('{}', { headers });
      },
    });
    await jar.fetch('http://x/1', { headers: { accept: 'application/json' } });
    expect(sent[0]?.get('cookie')).toBeNull();
    expect(sent[0]?.get('origin')).toBe('http://localhost:3000');
    expect(sent[0]?.get('accept')).toBe('application/json');
    expect(jar.cookieHeader()).toBe('a=1; b=2');
    await jar.fetch('http://x/2');
    expect(sent[1]?.get('cookie')).toBe('a=1; b=2');
    expect(jar.cookieHeader()).toBe('a=3');
    await jar.fetch('http://x/3');
    await jar.fetch('http://x/4');
    expect(sent[3]?.get('cookie')).toBe('a=3');
    jar.clear();
    expect(jar.cookieHeader()).toBe('');
  });
});
