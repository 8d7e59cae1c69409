// The chat hub's fan-out over real sockets: frames coalesced under load keep their order and all arrive, an idle
// hub flushes every turn, direct replies are not held back by a pending flush, and a socket that stops reading is
// still closed as a slow consumer. The load threshold is lowered (or raised) per hub instead of generating load.
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { type ChatConnection, type ChatHub, type ChatHubOptions, createChatHub } from '../../src/chat/hub.js';

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Peer {
  conn: ChatConnection;
  client: WebSocket;
  received: string[];
  /** Resolves once `count` frames have arrived in all. */
  receivedCount(count: number): Promise<void>;
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(options: Partial<ChatHubOptions>) {
  const hub = createChatHub({
    presence: { chatJoin: () => {}, chatLeave: () => {} },
    pingIntervalMs: 600_000,
    sendBufferLimitBytes: 1024 * 1024,
    logger: pino({ level: 'silent' }),
    ...options,
  });
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  cleanups.push(
    () => hub.stop(),
    () => new Promise<void>((resolve) => server.close(() => resolve())),
  );
  let seq = 0;
  const connect = async (): Promise<Peer> => {
    const accepted = new Promise<ChatConnection>((resolve) => {
      server.once('connection', (ws, req) => {
        const conn: ChatConnection = {
          id: `c${++seq}`,
          ws,
          socket: req.socket,
          role: 'guest',
          identity: null,
          ip: '127.0.0.1',
          alive: true,
          queue: null,
          corked: false,
        };
        hub.add(conn);
        resolve(conn);
      });
    });
    const { port } = server.address() as AddressInfo;
    const client = new WebSocket(`ws://127.0.0.1:${port}`, { perMessageDeflate: false });
    cleanups.push(() => client.terminate());
    const received: string[] = [];
    const waiters: Array<{ count: number; resolve: () => void }> = [];
    client.on('message', (data) => {
      received.push(String(data));
      for (const w of waiters.splice(0)) {
        if (received.length >= w.count) w.resolve();
        else waiters.push(w);
      }
    });
    await new Promise((resolve, reject) => {
      client.once('open', resolve);
      client.once('error', reject);
    });
    const receivedCount = (count: number) =>
      received.length >= count
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiters.push({ count, resolve }));
    return { conn: await accepted, client, received, receivedCount };
  };
  return { hub, connect };
}

const frame = (n: number) => Buffer.from(JSON.stringify({ type: 'new_message', n }));
const numbers = (received: string[]) => received.map((r) => (JSON.parse(r) as { n: number }).n);

/** Pushes frames 0..count-1 to every peer, one message per event-loop turn (as messages arriving one by one). */
async function pushInTurns(hub: ChatHub, peers: Peer[], count: number) {
  for (let n = 0; n < count; n++) {
    for (const p of peers) hub.push(p.conn, frame(n));
    await turn();
  }
}

describe('chat hub fan-out', () => {
  it('idle: every turn is flushed on its own (no added latency, one write per message)', async () => {
    // The default threshold is far above a test's load.
    const { hub, connect } = await setup({ coalesceMs: 10_000 });
    const peer = await connect();
    await pushInTurns(hub, [peer], 20);
    await peer.receivedCount(20);
    expect(numbers(peer.received)).toEqual([...Array(20).keys()]);
    expect(hub.stats()).toMatchObject({ fanoutFrames: 20, socketWrites: 20 });
  });

  it('loaded: frames of messages from many turns share one write, all of them in order', async () => {
    // A window no test waits out: only a direct reply can let the batch go before it.
    const { hub, connect } = await setup({ coalesceMs: 600_000, coalesceMinFramesPerSecond: 1 });
    const a = await connect();
    const b = await connect();
    // The first batch leaves at once (no flush yet to space it from); the rest waits for the window.
    await pushInTurns(hub, [a, b], 1);
    await a.receivedCount(1);
    await b.receivedCount(1);
    for (let n = 1; n < 50; n++) {
      hub.push(a.conn, frame(n));
      hub.push(b.conn, frame(n));
      await turn();
    }
    expect(a.received).toHaveLength(1);
    expect(b.received).toHaveLength(1);
    // A direct reply is not held back: it uncorks its socket, behind the frames corked before it.
    hub.sendNow(a.conn, frame(50));
    await a.receivedCount(51);
    expect(numbers(a.received)).toEqual([...Array(51).keys()]);
    // So does a reply through the initialisation queue's path (`send`).
    hub.send(b.conn, frame(50));
    await b.receivedCount(51);
    expect(numbers(b.received)).toEqual([...Array(51).keys()]);
    // 100 fan-out frames: two flushes per socket (the first batch, then the rest with the reply).
    expect(hub.stats()).toMatchObject({ fanoutFrames: 100, socketWrites: 4 });
  });

  it('loaded: a short window delivers everything, in order, in fewer writes than frames', async () => {
    const { hub, connect } = await setup({ coalesceMs: 5, coalesceMinFramesPerSecond: 1 });
    // One at a time: each connect() takes the server's next connection.
    const peers = [await connect(), await connect(), await connect()];
    await pushInTurns(hub, peers, 300);
    hub.broadcast(frame(300));
    for (const p of peers) {
      await p.receivedCount(301);
      expect(numbers(p.received)).toEqual([...Array(301).keys()]);
    }
    const { fanoutFrames, socketWrites } = hub.stats();
    expect(fanoutFrames).toBe(903);
    expect(socketWrites).toBeLessThanOrEqual(fanoutFrames);
  });

  it('loaded: a socket that stops reading is still closed as a slow consumer; the others get everything', async () => {
    const { hub, connect } = await setup({
      coalesceMs: 5,
      coalesceMinFramesPerSecond: 1,
      sendBufferLimitBytes: 16 * 1024,
    });
    const healthy = await connect();
    const slow = await connect();
    slow.client.pause();
    const closed = new Promise<number>((resolve) => slow.client.once('close', (code) => resolve(code)));
    const big = 'x'.repeat(8 * 1024);
    let n = 0;
    // Until the server gives up on the paused reader (the kernel buffers fill first).
    while (hub.stats().slowConsumersClosed === 0 && n < 20_000) {
      const data = Buffer.from(JSON.stringify({ type: 'new_message', n, big }));
      n++;
      hub.broadcast(data);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    expect(hub.stats().slowConsumersClosed).toBe(1);
    // The close frame waits behind what the paused reader has not read; the socket is destroyed after a grace
    // if it does not finish in time, so the code is 1008 or 1006, never a normal close.
    slow.client.resume();
    expect(await closed).not.toBe(1000);
    await healthy.receivedCount(n);
    expect(healthy.received.map((r) => (JSON.parse(r) as { n: number }).n)).toEqual([...Array(n).keys()]);
  });
});
