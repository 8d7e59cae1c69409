// The rooms-per-user limit (CONTRACT §6.1, CHAT_MAX_ROOMS_PER_USER) under concurrency, on two instances sharing
// PostgreSQL: each room's own lock serialised adds to that room only, so one user's concurrent joins and creations
// of different rooms all passed the count and overshot the limit.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { createVerifiedUser, requestAs, type TestUser } from '../helpers/users.js';

const LIMIT = 4;

describe('rooms per user under concurrency', () => {
  let env: TestEnv;
  let a: App;
  let b: App;
  const api = requestAs;
  const roomsOf = async (user: TestUser) => {
    const res = await api(a, user, 'GET', '/chat/rooms');
    expect(res.statusCode).toBe(200);
    return (res.json().rooms as Array<{ id: string; kind: string }>).filter((r) => r.kind !== 'general');
  };

  beforeAll(async () => {
    env = await createTestEnv({
      CHAT_MAX_ROOMS_PER_USER: String(LIMIT),
      CHAT_ROOM_CREATES_PER_HOUR: '1000',
    });
    a = await env.app({ INSTANCE_ID: 'limits-a' });
    b = await env.app({ INSTANCE_ID: 'limits-b' });
  });
  afterAll(async () => {
    await env.close();
  });

  it('concurrent creations by one user stop at the limit', async () => {
    const user = await createVerifiedUser(a, env.smtp, { name: 'Creator' });
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        api(i % 2 ? a : b, user, 'POST', '/chat/rooms', {
          name: `c${i} ${randomUUID().slice(0, 4)}`,
          kind: 'public',
        }),
      ),
    );
    const codes = results.map((r) => r.statusCode);
    expect(codes.filter((c) => c === 201)).toHaveLength(LIMIT);
    for (const r of results.filter((x) => x.statusCode !== 201)) {
      expect(r.statusCode, r.body).toBe(409);
      expect(r.json().code).toBe('ROOM_LIMIT');
    }
    expect(await roomsOf(user)).toHaveLength(LIMIT);
  });

  it('two users creating a private room with each other at the same time both succeed (no deadlock)', async () => {
    for (let round = 0; round < 5; round++) {
      const [x, y] = await Promise.all([
        createVerifiedUser(a, env.smtp, { name: `X${round}` }),
        createVerifiedUser(b, env.smtp, { name: `Y${round}` }),
      ]);
      if (!x || !y) throw new Error('users not created');
      const [fromX, fromY] = await Promise.all([
        api(a, x, 'POST', '/chat/rooms', { name: 'x and y', kind: 'private', memberIds: [y.id] }),
        api(b, y, 'POST', '/chat/rooms', { name: 'y and x', kind: 'private', memberIds: [x.id] }),
      ]);
      expect([fromX.statusCode, fromY.statusCode], `${fromX.body} ${fromY.body}`).toEqual([201, 201]);
    }
  });

  it('concurrent joins of different public rooms by one user stop at the limit', async () => {
    const owner = await createVerifiedUser(a, env.smtp, { name: 'Owner' });
    const rooms: string[] = [];
    for (let i = 0; i < LIMIT; i++) {
      const res = await api(a, owner, 'POST', '/chat/rooms', { name: `j${i}`, kind: 'public' });
      expect(res.statusCode, res.body).toBe(201);
      rooms.push(res.json().room.id);
    }
    const joiner = await createVerifiedUser(a, env.smtp, { name: 'Joiner' });
    // One room already: LIMIT - 1 more fit.
    const first = await api(a, joiner, 'POST', '/chat/rooms', { name: 'own', kind: 'public' });
    expect(first.statusCode).toBe(201);
    const results = await Promise.all(
      rooms.map((id, i) => api(i % 2 ? a : b, joiner, 'POST', `/chat/rooms/${id}/join`)),
    );
    expect(results.filter((r) => r.statusCode === 200)).toHaveLength(LIMIT - 1);
    const refused = results.filter((r) => r.statusCode !== 200);
    expect(refused).toHaveLength(1);
    expect(refused[0]?.json().code).toBe('ROOM_LIMIT');
    expect(await roomsOf(joiner)).toHaveLength(LIMIT);
  });
});
