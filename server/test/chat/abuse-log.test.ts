// Issue 22 (6): a chat guest writing 5,000 malformed frames in one burst used to produce ~5,000 warning lines.
// Malformed input now costs at most one log line per connection, and the socket is closed as abuse (4029).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { openChat } from '../helpers/ws-client.js';

describe('chat: no log amplification from malformed frames', () => {
  let env: TestEnv;
  let app: App;
  const logged: Array<Record<string, unknown>> = [];
  beforeAll(async () => {
    env = await createTestEnv({ LOG_LEVEL: 'info' });
    app = await env.app({}, { logStream: { write: (line: string) => void logged.push(JSON.parse(line)) } });
    await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(() => env.close());

  it.each([
    ['invalid JSON', '{not json'],
    ['an unknown type', JSON.stringify({ type: 'nope' })],
  ])('5,000 frames of %s in one burst: closed with 4029, one log line', async (_, frame) => {
    const guest = await openChat(app);
    const connectionId = String(guest.log.find((e) => e.type === 'connected')?.connectionId);
    const before = logged.length;
    for (let i = 0; i < 5_000; i++) guest.sendRaw(frame);
    const closed = await guest.closed;
    expect(closed.code).toBe(4029);
    // Let every frame already received be processed (they arrive after the close was decided).
    await new Promise((resolve) => setTimeout(resolve, 500));
    const lines = logged.slice(before).filter((l) => Number(l.level) >= 30);
    const aboutThis = lines.filter(
      (l) => JSON.stringify(l).includes(connectionId) || String(l.msg).startsWith('chat'),
    );
    expect(aboutThis.length, JSON.stringify(aboutThis.slice(0, 3))).toBeLessThanOrEqual(1);
    expect(lines.length).toBeLessThanOrEqual(2);
  });
});
