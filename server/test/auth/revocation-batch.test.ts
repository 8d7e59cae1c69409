// revocation.sessionsLive: the batched liveness check SSE convergence runs over every open stream each keep-alive
// interval. It must answer exactly what the one-by-one sessionStatus answers (live, revoked, banned, expired), keep
// its memory of verified sessions under the revocation marker (a bumped marker sends the session back to the
// database), and count an unreachable database as "live" (an outage must not close every connection). Real
// PostgreSQL and Redis.
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRevocation, type Revocation } from '../../src/auth/revocation.js';
import { createDatabase } from '../../src/infra/db.js';
import { createStore, type Store } from '../../src/infra/store.js';
import { createMigratedDatabase } from '../helpers/db.js';
import { TEST_REDIS_URL } from '../helpers/env.js';

let db: Awaited<ReturnType<typeof createMigratedDatabase>>;
let store: Store;
let revocation: Revocation;

const HOUR = 3_600_000;

async function user(id: string, banned = false, banExpires: Date | null = null) {
  await db.insertUser(id, { banned, banExpires });
}

async function session(id: string, userId: string, expiresInMs: number) {
  await db.pool.query(
    `insert into session (id, token, user_id, expires_at) values ($1, $1 || '-token', $2, $3)`,
    [id, userId, new Date(Date.now() + expiresInMs)],
  );
}

beforeAll(async () => {
  db = await createMigratedDatabase();
  store = createStore({ url: TEST_REDIS_URL, prefix: `t:${randomBytes(6).toString('hex')}:` });
  revocation = createRevocation({ store, db: db.database.db, logger: pino({ level: 'silent' }) });

  await user('alive');
  await session('s-live', 'alive', HOUR);
  await session('s-expired', 'alive', -1_000);
  await user('banned', true);
  await session('s-banned', 'banned', HOUR);
  // A ban that has run out no longer counts (auth's one ban rule).
  await user('ban-over', true, new Date(Date.now() - HOUR));
  await session('s-ban-over', 'ban-over', HOUR);
  await user('signed-out');
  // Banned and its sessions deleted (what a ban does): told apart from a plain revocation.
  await user('banned-gone', true);
});

afterAll(async () => {
  revocation?.close();
  await store?.close();
  await db?.close();
});

const checks = [
  { userId: 'alive', sessionId: 's-live' },
  { userId: 'alive', sessionId: 's-expired' },
  { userId: 'banned', sessionId: 's-banned' },
  { userId: 'ban-over', sessionId: 's-ban-over' },
  { userId: 'signed-out', sessionId: 's-never-existed' },
  { userId: 'banned-gone', sessionId: 's-deleted' },
];

describe('revocation.sessionsLive', () => {
  it('answers what sessionStatus answers, session by session', async () => {
    const batch = await revocation.sessionsLive(checks);
    expect(batch).toEqual([true, false, false, true, false, false]);
    // A second revocation instance (no memory) asked one by one agrees, with the reasons.
    const other = createRevocation({ store, db: db.database.db, logger: pino({ level: 'silent' }) });
    try {
      const one = [];
      for (const c of checks) one.push(await other.sessionStatus(c.userId, c.sessionId));
      expect(one).toEqual(['live', 'expired', 'banned', 'live', 'revoked', 'banned']);
      expect(one.map((s) => s === 'live')).toEqual(batch);
    } finally {
      other.close();
    }
  });

  it('remembers a verified session until its user’s marker moves', async () => {
    await user('remembered');
    await session('s-remembered', 'remembered', HOUR);
    const c = [{ userId: 'remembered', sessionId: 's-remembered' }];
    expect(await revocation.sessionsLive(c)).toEqual([true]);
    // Deleted behind the revocation's back (no marker bump): still answered from memory.
    await db.pool.query(`delete from session where id = 's-remembered'`);
    expect(await revocation.sessionsLive(c)).toEqual([true]);
    // A revocation through Herald bumps the marker: the next check goes to the database and sees it.
    const { scope } = await revocation.runScoped(async () => revocation.touched('remembered'));
    await revocation.commit(scope);
    expect(await revocation.sessionsLive(c)).toEqual([false]);
    // And once ended, a session stays ended.
    await session('s-remembered', 'remembered', HOUR);
    expect(await revocation.sessionsLive(c)).toEqual([false]);
  });

  it('remembers a verdict for the user and session checked, never for the session id under another user', async () => {
    await user('owner');
    await user('stranger');
    await session('s-owned', 'owner', HOUR);
    // Verified (and remembered) for its owner, in the batch and one by one.
    expect(await revocation.sessionsLive([{ userId: 'owner', sessionId: 's-owned' }])).toEqual([true]);
    expect(await revocation.sessionStatus('owner', 's-owned')).toBe('live');
    // The same session id with another user's id is not that user's session: the database says so, whatever
    // the memory holds for its owner.
    expect(await revocation.sessionStatus('stranger', 's-owned')).toBe('revoked');
    expect(await revocation.sessionsLive([{ userId: 'stranger', sessionId: 's-owned' }])).toEqual([false]);
    // And that refusal is not remembered against the owner.
    expect(await revocation.sessionStatus('owner', 's-owned')).toBe('live');
  });

  it('counts an unreachable database as live', async () => {
    const broken = await createDatabase({
      databaseUrl: 'postgres://postgres@127.0.0.1:1/nowhere',
      dataDir: '',
    });
    const blind = createRevocation({ store, db: broken.db, logger: pino({ level: 'silent' }) });
    try {
      expect(await blind.sessionsLive([{ userId: 'banned', sessionId: 's-banned' }])).toEqual([true]);
    } finally {
      blind.close();
      await broken.close();
    }
  });
});
