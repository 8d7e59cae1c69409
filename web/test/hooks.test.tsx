// The SDK's React hooks used outside <HeraldProvider> fail loudly with the hook's and the provider's name (a
// silent null client would surface much later as a confusing error), here as the web app renders them.
import { useChat, useHeraldClient, useNotifications, useSession, useUnreadCount } from '@herald/client/react';
import { renderToString } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { safeNext } from '../src/pages/SignIn';

const hooks = { useChat, useHeraldClient, useNotifications, useSession, useUnreadCount };

function Probe({ hook }: { hook: () => unknown }) {
  hook();
  return null;
}

describe('hooks outside the provider', () => {
  it.each(Object.entries(hooks))('%s throws naming itself and HeraldProvider', (name, hook) => {
    expect(() => renderToString(<Probe hook={hook} />)).toThrow(new RegExp(`${name}.*HeraldProvider`));
  });
});

describe('sign-in redirect target', () => {
  it('follows only same-site paths', () => {
    expect(safeNext('/chat')).toBe('/chat');
    expect(safeNext('/admin/users?x=1')).toBe('/admin/users?x=1');
    for (const bad of [null, '', 'https://evil.example', '//evil.example', 'javascript:alert(1)']) {
      expect(safeNext(bad)).toBe('/notifications');
    }
  });
});
