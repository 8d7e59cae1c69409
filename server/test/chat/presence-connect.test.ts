// The cost of a chat connect in the store, with two real server processes on a private redis-server: a connect
// (guest or member) is greeted with the last refreshed presence counts and issues no recount (the recount's Lua
// walks every instance's member/admin sets with SMEMBERS), while the debounced refresh still makes every
// instance's counts converge after joins and leaves.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';
import { type ChatClient, type ChatEvent, openChat } from '../helpers/ws-client.js';

const ADMIN_EMAIL = `pc-admin-${randomUUID().slice(0, 8)}@example.test`;
const MEMBERS = 6;
const GUESTS = 40;
/**
 * Long enough that no debounced refresh can fire while a burst of connects is measured: a join's refresh runs
 * two windows later (flush and publish, then recount), so every SMEMBERS in that span comes from connects.
 */
const DEBOUNCE_MS = 2_500;
const QUIET_MS = 2 * DEBOUNCE_MS;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('chat connect cost and presence convergence (2 processes)', () => {
  let cluster: TestCluster;
  let redis: Redis;
  let members: Array<{ id: string; cookie: string }>;
  let admin: { cookie: string };
  const clients: ChatClient[] = [];

  const open = async (i: number, cookie?: string) => {
    const c = await openChat(`ws://127.0.0.1:${cluster.port(i)}/chat`, { cookie, origin: CLUSTER_ORIGIN });
    clients.push(c);
    return c;
  };
  /** Calls of `command` since the server started, from INFO commandstats (script-issued calls included). */
  const calls = async (command: string) => {
    const info = await redis.info('commandstats');
    const match = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info);
    return Number(match?.[1] ?? 0);
  };
  const counts = (e: ChatEvent) => ({ guests: e.guests, members: e.members, admins: e.admins });

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      env: {
        ADMIN_EMAILS: ADMIN_EMAIL,
        PRESENCE_DEBOUNCE_MS: String(DEBOUNCE_MS),
        CHAT_MAX_CONNECTIONS_PER_IP: '500',
        LOG_LEVEL: 'warn',
      },
    });
    redis = new Redis(cluster.redisUrl, { lazyConnect: true });
    await redis.connect();
    members = [];
    for (let i = 0; i < MEMBERS; i++) members.push(await createVerifiedUserOn(cluster, i % 2));
    admin = await createVerifiedUserOn(cluster, 0, { email: ADMIN_EMAIL, name: 'Admin' });
  }, 120_000);
  afterAll(async () => {
    await Promise.allSettled(clients.splice(0).map((c) => c.close()));
    redis?.disconnect();
    await cluster?.close();
  });

  it('greets connects from the last counts without recounting; counts converge on both instances', async () => {
    // Signed-in members on both instances (each counted once), the admin, and one watcher guest per instance.
    const watchers = [await open(0), await open(1)];
    for (const [i, m] of members.entries()) {
      await open(0, m.cookie);
      if (i % 2 === 0) await open(1, m.cookie);
    }
    await open(1, admin.cookie);
    const settled = { guests: 2, members: MEMBERS, admins: 1 };
    const matches = (want: typeof settled) => (e: ChatEvent) =>
      e.guests === want.guests && e.members === want.members && e.admins === want.admins;
    await Promise.all(watchers.map((w) => w.next('presence', matches(settled), 20_000)));
    // Let any flush and recount still pending run out, so the store is quiet before the burst.
    await delay(QUIET_MS);

    // A burst of connects (guests and members, on both instances), measured in the store.
    const smembersBefore = await calls('smembers');
    const evalBefore = (await calls('eval')) + (await calls('evalsha'));
    const started = Date.now();
    const burst = await Promise.all([
      ...Array.from({ length: GUESTS }, (_, i) => open(i % 2)),
      ...members.map((m, i) => open(i % 2, m.cookie)),
    ]);
    const greetings = await Promise.all(burst.map((c) => c.next('presence', () => true, 20_000)));
    const elapsed = Date.now() - started;
    const smembers = (await calls('smembers')) - smembersBefore;
    const evals = (await calls('eval')) + (await calls('evalsha')) - evalBefore;
    if (elapsed < QUIET_MS) {
      // No refresh could fire in this window: any SMEMBERS would be a per-connect recount (four per connect
      // before: members and admins of two instances). Each was greeted with the counts every client had.
      expect(smembers).toBe(0);
      for (const g of greetings) expect(counts(g)).toEqual(settled);
    }
    // Whatever the timing, nowhere near one recount per connect (the registry's heartbeat also uses EVAL).
    expect(smembers).toBeLessThan(burst.length);
    expect(evals).toBeLessThan(burst.length);

    // The debounced refresh after the joins reaches everyone, the new connections included.
    const joined = { guests: 2 + GUESTS, members: MEMBERS, admins: 1 };
    await Promise.all([...watchers, ...burst].map((c) => c.next('presence', matches(joined), 20_000)));

    // Leaves on one instance converge on the other, and a later connect is greeted with the new counts.
    const leaving = burst.filter((_, i) => i < GUESTS && i % 2 === 0);
    await Promise.all(leaving.map((c) => c.close()));
    const left = { guests: 2 + GUESTS - leaving.length, members: MEMBERS, admins: 1 };
    await Promise.all(watchers.map((w) => w.next('presence', matches(left), 20_000)));
    const late = await open(1);
    expect(counts(await late.next('presence'))).toEqual(left);
  }, 120_000);
});
