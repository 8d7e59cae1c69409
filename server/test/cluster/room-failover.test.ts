// Room resume through a Redis Cluster failover (issue 23): two instances on a private Redis Cluster, a private room
// whose bus channel lives on the master that is SIGKILLed, messages sent to it continuously on instance A while the
// replica takes over. Two followers on instance B apply the §6.1 client rule (docs/chat-protocol.md, "Order, seq,
// rev and resume") with raw frames: one stays connected throughout, the other drops its socket while the master is
// down and resubscribes with `sinceSeq`. Both must end with every seq of the room exactly once and in order.
// This test found the room channel that ioredis can lose after a failover (both followers stuck for good, 2 of 15
// runs); bus-room-channels.test.ts reproduces that loss on demand.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roomTopic } from '../../src/chat/protocol.js';
import { busChannels, channelFor } from '../../src/realtime/keys.js';
import { CLUSTER_ORIGIN, createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';
import type { TestRedisCluster } from '../helpers/redis-cluster.js';
import { type ChatClient, type ChatEvent, openChat } from '../helpers/ws-client.js';

const METRICS_KEY = 'room-failover-metrics-key-0123456789abcd';
const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A room follower as the SDK's client/src/rooms.ts behaves on the wire: applies `new_message` frames whose `rev`
 * is above the last applied; a seq more than one above the highest seen means a lost frame, so it resubscribes
 * from what it holds instead of applying it; after a reconnect it resubscribes with the last seq.
 */
class RoomFollower {
  /** Every seq applied, in the order applied (duplicates included, so the test can see them). */
  readonly applied: number[] = [];
  lastSeq = 0;
  lastRev = 0;
  gapResubscribes = 0;
  reconnects = 0;
  resyncs = 0;
  private chat: ChatClient | undefined;
  private awaitingSubscribed = false;

  constructor(
    private readonly url: string,
    private readonly cookie: string,
    private readonly roomId: string,
  ) {}

  async connect(): Promise<void> {
    const chat = await openChat(`${this.url}?rooms=1`, { cookie: this.cookie, origin: CLUSTER_ORIGIN });
    this.chat = chat;
    chat.ws.on('message', (data) => {
      if (this.chat === chat) this.onFrame(JSON.parse(String(data)) as ChatEvent);
    });
    this.subscribe();
    await chat.next('subscribed', (e) => e.roomId === this.roomId);
  }

  /** Drops the socket (as a network cut would) and comes back with `sinceSeq`. */
  async reconnect(): Promise<void> {
    const old = this.chat;
    this.chat = undefined;
    old?.ws.terminate();
    this.reconnects++;
    await this.connect();
  }

  private subscribe(): void {
    this.awaitingSubscribed = true;
    this.chat?.send({ type: 'subscribe', roomId: this.roomId, sinceSeq: this.lastSeq });
  }

  private onFrame(e: ChatEvent): void {
    if (e.roomId !== this.roomId) return;
    if (e.type === 'subscribed') {
      this.awaitingSubscribed = false;
      if (e.resync) this.resyncs++;
      return;
    }
    if (e.type !== 'new_message') return;
    const rev = Number(e.rev);
    const seq = Number(e.message?.seq);
    if (rev <= this.lastRev) return;
    if (seq > this.lastSeq + 1) {
      // A frame was lost: the replay after `subscribed` brings it (and everything after it) in order.
      if (!this.awaitingSubscribed) {
        this.gapResubscribes++;
        this.subscribe();
      }
      return;
    }
    this.applied.push(seq);
    this.lastSeq = Math.max(this.lastSeq, seq);
    this.lastRev = rev;
  }

  /** What it holds and where it waits: printed when it did not catch up. */
  describe(): string {
    const frames = (this.chat?.log ?? [])
      .filter((e) => e.roomId === this.roomId)
      .slice(-8)
      .map(
        (e) =>
          `${e.type}${e.message ? ` seq ${e.message.seq} rev ${e.rev}` : ''}${e.type === 'subscribed' ? ` lastSeq ${e.lastSeq} rev ${e.rev} replayed ${e.replayed}` : ''}`,
      );
    return `lastSeq ${this.lastSeq} lastRev ${this.lastRev}, ${this.applied.length} applied, awaiting subscribed: ${this.awaitingSubscribed}, gap resubscribes ${this.gapResubscribes}; last frames: ${frames.join(' | ')}`;
  }

  async close(): Promise<void> {
    await this.chat?.close();
  }
}

describe('room resume through a Redis Cluster master failover', () => {
  let cluster: TestCluster;
  let rc: TestRedisCluster;
  let db: pg.Client;
  const followers: RoomFollower[] = [];
  const senders: ChatClient[] = [];

  beforeAll(async () => {
    cluster = await startCluster({
      instances: 2,
      redis: 'cluster',
      env: { METRICS_API_KEY: METRICS_KEY, CHAT_THROTTLE_LIMIT: '100000', LOG_LEVEL: 'warn' },
    });
    if (!cluster.redisCluster) throw new Error('expected a Redis Cluster');
    rc = cluster.redisCluster;
    db = new pg.Client({ connectionString: cluster.db.url });
    await db.connect();
  }, 180_000);
  afterAll(async () => {
    await Promise.allSettled([...followers.map((f) => f.close()), ...senders.map((c) => c.close())]);
    await db?.end();
    await cluster?.close();
  });

  const degraded = async (i: number) => {
    try {
      const res = await fetch(`${cluster.url(i)}/metrics`, {
        headers: { authorization: `Bearer ${METRICS_KEY}` },
      });
      return ((await res.json()) as { pubsub: { isDegraded: boolean } }).pubsub.isDegraded;
    } catch {
      return true;
    }
  };
  const lastSeq = async (roomId: string) =>
    Number(
      (await db.query<{ last_seq: string }>('select last_seq from chat_room where id = $1', [roomId])).rows[0]
        ?.last_seq,
    );

  it('a follower that stays and one that resumes with sinceSeq each end with every seq once, in order', async () => {
    const [alice, bob] = await Promise.all([
      createVerifiedUserOn(cluster, 0),
      createVerifiedUserOn(cluster, 1),
    ]);
    const created = await fetch(`${cluster.url(0)}/chat/rooms`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: CLUSTER_ORIGIN, cookie: alice.cookie },
      body: JSON.stringify({ name: 'Failover room', kind: 'private', memberIds: [bob.id] }),
    });
    expect(created.status).toBe(201);
    const roomId = ((await created.json()) as { room: { id: string } }).room.id;

    // The master that carries the room's own bus channel (SSUBSCRIBE'd per shard) is the one to kill.
    const channel = channelFor(busChannels(`${cluster.prefix}rt:bus`), roomTopic(roomId), {}, '');
    const slot = Number((await rc.cli(rc.ports[0] ?? 0, 'cluster', 'keyslot', channel)).trim());
    const owner = (await rc.nodes()).find(
      (n) =>
        n.role === 'master' &&
        n.slots.some((range) => {
          const [lo, hi] = range.split('-').map(Number);
          return lo !== undefined && slot >= lo && slot <= (hi ?? lo);
        }),
    );
    if (!owner) throw new Error(`no master owns slot ${slot}`);

    const chatUrl = `ws://127.0.0.1:${cluster.port(1)}/chat`;
    const steady = new RoomFollower(chatUrl, bob.cookie, roomId);
    const resuming = new RoomFollower(chatUrl, bob.cookie, roomId);
    followers.push(steady, resuming);
    await Promise.all([steady.connect(), resuming.connect()]);

    // Four sockets of Alice's on instance A, each a well-behaved sender (as the SDK's `send`): one message in
    // flight, the next after its answer, which is its `new_message` (stored) or an error frame (refused).
    // Unanswered sends would pile up behind the store's timeouts while the shard is down and end in
    // TOO_MANY_REQUESTS, then the abuse close. Four of them keep messages coming while each waits out a timeout.
    senders.push(
      ...(await Promise.all(
        Array.from({ length: 4 }, () =>
          openChat(`ws://127.0.0.1:${cluster.port(0)}/chat?rooms=1`, {
            cookie: alice.cookie,
            origin: CLUSTER_ORIGIN,
          }),
        ),
      )),
    );
    let sent = 0;
    const refused: string[] = [];
    let traffic = true;
    const sendLoop = async (a: ChatClient) => {
      let answer: ((outcome: string) => void) | undefined;
      let waitingFor = '';
      a.ws.on('message', (data) => {
        const e = JSON.parse(String(data)) as ChatEvent;
        if (e.type === 'new_message' && e.message?.clientMessageId === waitingFor) answer?.('stored');
        else if (e.type === 'error' || e.type === 'throttled') answer?.(String(e.code ?? e.type));
      });
      while (traffic) {
        waitingFor = randomUUID();
        const outcome = new Promise<string>((resolve) => {
          answer = resolve;
        });
        a.send({ type: 'send_message', roomId, message: `m ${sent++}`, clientMessageId: waitingFor });
        const result = await outcome;
        if (result !== 'stored') refused.push(result);
        await delay(50);
      }
    };
    const chatter = Promise.all(senders.map(sendLoop));

    await delay(1_000);
    const seqAtKill = await lastSeq(roomId);
    const killedAt = Date.now();
    await rc.killMaster(owner.port);
    // While the shard is down (before any replica is promoted) the resuming follower cuts its socket and comes
    // back with sinceSeq; the other keeps its socket.
    await delay(300);
    await resuming.reconnect();
    await rc.waitForFailover(owner.port);
    const promotedAfterMs = Date.now() - killedAt;
    const seqAtPromotion = await lastSeq(roomId);

    // Recovered: both instances out of degraded mode and the steady follower receiving live frames again.
    // The deadlines below bound a hang (then the assertions show what is missing); they time nothing.
    const recoverBy = Date.now() + 120_000;
    for (let recovered = false; !recovered && Date.now() < recoverBy; ) {
      const states = await Promise.all([degraded(0), degraded(1)]);
      const target = await lastSeq(roomId);
      if (states.every((d) => !d) && target > seqAtPromotion) {
        for (let i = 0; i < 50 && steady.lastSeq < target; i++) await delay(100);
        recovered = steady.lastSeq >= target;
      }
      if (!recovered) await delay(200);
    }
    const recoveredAfterMs = Date.now() - killedAt;
    const seqAtRecovery = await lastSeq(roomId);
    // A second resume after the failover, from wherever it had got to.
    await resuming.reconnect();
    await delay(1_000);
    traffic = false;
    await chatter;

    const final = await lastSeq(roomId);
    const catchUpBy = Date.now() + 60_000;
    for (const f of followers) {
      while (f.lastSeq < final && Date.now() < catchUpBy) await delay(100);
    }
    await delay(300);
    const everySeq = Array.from({ length: final }, (_, i) => i + 1);
    console.log(
      `room failover: ${sent} sent, ${final} stored, refused: ${refused.join(',') || 'none'} (${seqAtKill} before the kill, ${seqAtRecovery - seqAtKill} from the kill to recovery); ` +
        `promoted after ${promotedAfterMs} ms, recovered (not degraded, live frames again) after ${recoveredAfterMs} ms; ` +
        `steady follower: ${steady.gapResubscribes} gap resubscriptions; resuming follower: ${resuming.reconnects} reconnects, ${resuming.gapResubscribes} gap resubscriptions`,
    );
    for (const [name, f] of [
      ['steady', steady],
      ['resuming', resuming],
    ] as const) {
      if (f.lastSeq < final) {
        console.log(`${name} follower stuck: ${f.describe()}`);
        for (const i of [0, 1]) console.log(`instance ${i} log:\n${cluster.logs(i).slice(-40).join('\n')}`);
      }
    }
    expect(refused).toEqual([]);
    expect(seqAtRecovery).toBeGreaterThan(seqAtKill);
    expect(steady.applied).toEqual(everySeq);
    expect(resuming.applied).toEqual(everySeq);
    expect(steady.resyncs + resuming.resyncs).toBe(0);
    await rc.restartNode(owner.port);
  }, 240_000);
});
