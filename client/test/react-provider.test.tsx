import { renderToString } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { createHeraldClient } from '../src/index.js';
import {
  HeraldProvider,
  useChat,
  useHeraldClient,
  useNotifications,
  useSession,
  useUnreadCount,
} from '../src/react.js';

const hooks = { useChat, useHeraldClient, useNotifications, useSession, useUnreadCount } as const;

function CallsHook(props: { hook: () => unknown }) {
  props.hook();
  return null;
}

function AllHooks() {
  const n = useNotifications();
  const c = useChat();
  const count = useUnreadCount();
  const client = useHeraldClient();
  return <p>{`${n.status}/${c.status}/${String(count)}/${typeof client.close}`}</p>;
}

describe('createHeraldClient', () => {
  it("refuses a base URL it cannot use, naming the problem ('' outside a page)", () => {
    expect(() => createHeraldClient({ baseURL: '' })).toThrow(/there is no page here/);
    expect(() => createHeraldClient({ baseURL: 'localhost:3001' })).toThrow(/http\(s\) URL/);
    createHeraldClient({ baseURL: 'https://api.example/' }).close();
  });
});

describe('React hooks', () => {
  for (const [name, hook] of Object.entries(hooks)) {
    it(`${name} outside <HeraldProvider> throws an error naming the hook and the provider`, () => {
      expect(() => renderToString(<CallsHook hook={hook} />)).toThrow(
        `${name} must be used inside <HeraldProvider>`,
      );
    });
  }

  it('inside the provider they render (server rendering: no effects, so nothing connects)', () => {
    const client = createHeraldClient({
      baseURL: 'http://127.0.0.1:9',
      // Any request would be a bug here: rendering on the server must not fetch.
      fetch: () => Promise.reject(new Error('no network in this test')),
      locks: null,
      BroadcastChannel: null,
    });
    const html = renderToString(
      <HeraldProvider client={client}>
        <AllHooks />
      </HeraldProvider>,
    );
    expect(html).toContain('idle/idle/null/function');
    client.close();
  });
});
