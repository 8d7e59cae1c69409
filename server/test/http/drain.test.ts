// The request drain (http/drain.ts) on its own Fastify instance over real loopback sockets: which requests it
// waits for (requests in flight, pipelined ones, the first request of a connection accepted just before the
// drain, the next request on a kept-alive connection), which it does not (a hijacked SSE-style reply, a
// WebSocket), that it closes connections left idle, and the 503 for what is still running after the grace.
// It finds requests through their connections, not a per-request collection (performance reasons in drain.ts);
// these tests pin the behaviour that bookkeeping must keep.
import net from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { installRequestDrain, type RequestDrain } from '../../src/http/drain.js';
import { installErrorHandling } from '../../src/http/errors.js';
import { captureLogger } from '../helpers/logs.js';

interface Harness {
  app: FastifyInstance;
  drain: RequestDrain;
  port: number;
  /** Releases the requests waiting on `/slow?gate=<name>`. */
  open(gate: string): void;
  /** Resolves once `n` requests have started on `/slow` (onRequest seen, handler entered). */
  started(n: number): Promise<void>;
}

const apps: FastifyInstance[] = [];
afterEach(async () => {
  while (apps.length > 0) await apps.pop()?.close();
});

async function harness(graceMs: number, keptAliveWaitMs?: number): Promise<Harness> {
  const app = Fastify({ forceCloseConnections: true });
  apps.push(app);
  installErrorHandling(app);
  const drain = installRequestDrain(app, {
    graceMs,
    logger: captureLogger().logger,
    ...(keptAliveWaitMs === undefined ? {} : { keptAliveWaitMs }),
  });
  const gates = new Map<string, { promise: Promise<void>; resolve: () => void }>();
  const gate = (name: string) => {
    let g = gates.get(name);
    if (!g) {
      let resolve = () => {};
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      g = { promise, resolve };
      gates.set(name, g);
    }
    return g;
  };
  let startedCount = 0;
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  app.get<{ Querystring: { gate: string } }>('/slow', async (request) => {
    startedCount++;
    for (const w of waiters.filter((x) => startedCount >= x.n)) w.resolve();
    await gate(request.query.gate).promise;
    return { done: request.query.gate };
  });
  app.get('/fast', async () => ({ fast: true }));
  // A route that takes its response over and keeps it open, as the SSE stream does.
  app.get('/stream', (_request, reply) => {
    reply.hijack();
    reply.raw.writeHead(200, { 'content-type': 'text/event-stream' });
    reply.raw.write(': open\n\n');
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  if (!address || typeof address === 'string') throw new Error('no port');
  return {
    app,
    drain,
    port: address.port,
    open: (name) => gate(name).resolve(),
    started: (n) =>
      startedCount >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ n, resolve })),
  };
}

/** 'ended' when the drain is over within `ms`, else 'waiting'. */
const within = (drained: Promise<unknown>, ms: number) =>
  Promise.race([drained.then(() => 'ended'), new Promise((r) => setTimeout(r, ms, 'waiting'))]);

/** Raw HTTP/1.1 over one socket: what came back, read until the server closes or `until` matches. */
function rawExchange(port: number, text: string, until: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
    let got = '';
    socket.on('data', (chunk) => {
      got += chunk.toString('latin1');
      if (until.test(got)) {
        socket.destroy();
        resolve(got);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(got));
  });
}

describe('request drain', () => {
  it('counts requests in flight, lets them finish, and leaves nothing behind on a reused connection', async () => {
    const h = await harness(5_000);
    // 200 requests on one keep-alive connection, then one held open.
    const agentFetch = (path: string) => fetch(`http://127.0.0.1:${h.port}${path}`);
    for (let i = 0; i < 200; i++) expect((await agentFetch('/fast')).status).toBe(200);
    expect(h.drain.inFlight()).toBe(0);
    const slow = agentFetch('/slow?gate=a');
    await h.started(1);
    expect(h.drain.inFlight()).toBe(1);
    const drained = h.drain.drain();
    // The drain waits: the request has not been answered yet.
    const early = await within(drained, 200);
    expect(early).toBe('waiting');
    h.open('a');
    const res = await slow;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ done: 'a' });
    expect(await drained).toEqual({ finished: 1, cutShort: 0 });
    expect(h.drain.inFlight()).toBe(0);
  });

  it('waits for both of two pipelined requests on one connection', async () => {
    const h = await harness(5_000);
    const exchange = rawExchange(
      h.port,
      'GET /slow?gate=p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /slow?gate=p2 HTTP/1.1\r\nHost: x\r\n\r\n',
      /"done":"p1".*"done":"p2"/s,
    );
    await h.started(2);
    expect(h.drain.inFlight()).toBe(2);
    const drained = h.drain.drain();
    h.open('p1');
    await new Promise((r) => setTimeout(r, 100));
    // One answered, the other still running: the drain is still waiting for it.
    expect(h.drain.inFlight()).toBe(1);
    h.open('p2');
    const got = await exchange;
    expect(got.match(/HTTP\/1\.1 200/g)).toHaveLength(2);
    expect(await drained).toEqual({ finished: 2, cutShort: 0 });
  });

  it('answers the first request of a connection accepted just before the drain', async () => {
    const h = await harness(5_000);
    const socket = net.connect(h.port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    // Let the server see the connection, then start the drain before any byte of the request arrives.
    await new Promise((r) => setTimeout(r, 50));
    const drained = h.drain.drain();
    let got = '';
    const answered = new Promise<void>((resolve) => {
      socket.on('data', (chunk) => {
        got += chunk.toString('latin1');
        if (got.includes('"fast":true')) resolve();
      });
    });
    const early = await within(drained, 100);
    expect(early).toBe('waiting');
    socket.write('GET /fast HTTP/1.1\r\nHost: x\r\n\r\n');
    await answered;
    socket.destroy();
    expect(got).toMatch(/^HTTP\/1\.1 200/);
    expect((await drained).cutShort).toBe(0);
  });

  it('does not wait for a hijacked stream, and cuts short what still runs after the grace with a 503', async () => {
    const h = await harness(300);
    const stream = rawExchange(h.port, 'GET /stream HTTP/1.1\r\nHost: x\r\n\r\n', /: open/);
    expect(await stream).toContain(': open');
    const released: string[] = [];
    // The work unwinds (and calls its disposer) right after its release, as a cut-short broadcast does.
    const dispose: () => void = h.drain.onCutShort(() => {
      released.push('released');
      setImmediate(() => dispose());
    });
    const slow = fetch(`http://127.0.0.1:${h.port}/slow?gate=never`);
    await h.started(1);
    expect(h.drain.inFlight()).toBe(1);
    const result = await h.drain.drain();
    expect(result).toEqual({ finished: 0, cutShort: 1 });
    expect(released).toEqual(['released']);
    expect(h.drain.signal.aborted).toBe(true);
    const res = await slow;
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.json()).toMatchObject({ code: 'UNAVAILABLE' });
    h.open('never');
  });

  it('answers a request arriving on an idle keep-alive connection during the wait, and closes one left idle', async () => {
    // A wider wait than production's 100 ms, so the test's own timing cannot decide it.
    const h = await harness(5_000, 1_000);
    /** A kept-alive connection that has had one request answered; `next` sends another on it. */
    const keptAlive = async () => {
      const socket = net.connect(h.port, '127.0.0.1');
      let got = '';
      let waiter: { pattern: RegExp; resolve: () => void } | undefined;
      socket.on('data', (chunk) => {
        got += chunk.toString('latin1');
        if (waiter?.pattern.test(got)) waiter.resolve();
      });
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      socket.on('error', () => {});
      const answered = (pattern: RegExp) =>
        new Promise<void>((resolve) => {
          waiter = { pattern, resolve };
          if (pattern.test(got)) resolve();
        });
      socket.write('GET /fast HTTP/1.1\r\nHost: x\r\n\r\n');
      await answered(/"fast":true/);
      return {
        closed,
        text: () => got,
        next: async () => {
          socket.write('GET /fast?again=1 HTTP/1.1\r\nHost: x\r\n\r\n');
          await answered(/"fast":true[\s\S]*"fast":true/);
        },
        destroy: () => socket.destroy(),
      };
    };
    const busy = await keptAlive();
    const quiet = await keptAlive();
    let quietClosed = false;
    void quiet.closed.then(() => {
      quietClosed = true;
    });
    const drained = h.drain.drain();
    const early = await within(drained, 100);
    // Nothing is in flight, but two connections could still carry a request: the drain waits.
    expect(early).toBe('waiting');
    await busy.next();
    expect(busy.text().match(/HTTP\/1\.1 200/g)).toHaveLength(2);
    expect(quietClosed).toBe(false);
    expect(await drained).toEqual({ finished: 0, cutShort: 0 });
    // The connection that stayed idle was closed by the drain, so no request can be read on it after the drain.
    await quiet.closed;
    expect(quietClosed).toBe(true);
    busy.destroy();
  });

  it('neither waits for nor counts a connection upgraded to a WebSocket', async () => {
    const h = await harness(5_000);
    const upgraded: net.Socket[] = [];
    h.app.server.on('upgrade', (_req, socket: net.Socket) => {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
      upgraded.push(socket);
    });
    // The client keeps its end open (an open chat socket) until the drain is over.
    const client = net.connect(h.port, '127.0.0.1', () =>
      client.write('GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'),
    );
    const head = await new Promise<string>((resolve) =>
      client.once('data', (c) => resolve(c.toString('latin1'))),
    );
    expect(head).toMatch(/^HTTP\/1\.1 101/);
    expect(h.drain.inFlight()).toBe(0);
    // Were it taken for a connection still to send its first request, the drain would wait up to 1 s for it.
    const drained = h.drain.drain();
    const first = await within(drained, 700);
    expect(first).toBe('ended');
    expect(await drained).toEqual({ finished: 0, cutShort: 0 });
    expect(client.destroyed).toBe(false);
    client.destroy();
    for (const socket of upgraded) socket.destroy();
  });

  it('stops accepting connections once the drain starts', async () => {
    const h = await harness(1_000);
    await h.drain.drain();
    const refused = await fetch(`http://127.0.0.1:${h.port}/fast`).then(
      () => 'answered',
      (err: { cause?: { code?: string } }) => err.cause?.code,
    );
    expect(refused).toBe('ECONNREFUSED');
  });
});
