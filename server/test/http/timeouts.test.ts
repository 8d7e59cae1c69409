// Slow-client limits over real sockets: a stalled body or stalled headers get the connection closed after the
// (shrunk) timeouts, SSE streams and chat sockets outlive those timeouts, and the per-address connection cap
// refuses the extra connection while the server keeps answering the others.
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createTestEnv, type TestEnv } from '../helpers/app.js';
import { openStream } from '../helpers/sse-client.js';
import { createVerifiedUser } from '../helpers/users.js';
import { openChat } from '../helpers/ws-client.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface RawSocket {
  socket: net.Socket;
  received: () => string;
  closed: Promise<number>;
  isClosed: () => boolean;
}

/** A raw TCP connection; `closed` resolves with the ms elapsed between connecting and the server closing it. */
function connect(port: number): Promise<RawSocket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    let data = '';
    let isClosed = false;
    const started = Date.now();
    const closed = new Promise<number>((r) => {
      socket.on('close', () => {
        isClosed = true;
        r(Date.now() - started);
      });
    });
    socket.on('data', (chunk) => {
      data += chunk.toString('utf8');
    });
    // A refused connection is reset; that is an expected outcome here, not a test failure.
    socket.on('error', () => {});
    socket.once('connect', () => resolve({ socket, received: () => data, closed, isClosed: () => isClosed }));
    socket.once('error', reject);
  });
}

const portOf = (app: App) => (app.server.address() as AddressInfo).port;

describe('HTTP timeouts', () => {
  let env: TestEnv;
  let app: App;
  const REQUEST_TIMEOUT = 600;
  const HEADERS_TIMEOUT = 400;

  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app({
      HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT),
      HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT),
      SSE_KEEPALIVE_MS: '200',
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await env.close();
  });

  it('closes a connection whose body stalls after the headers (408)', async () => {
    const raw = await connect(portOf(app));
    raw.socket.write(
      'POST /auth/sign-in/email HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"email":',
    );
    const elapsed = await Promise.race([raw.closed, sleep(5_000).then(() => -1)]);
    expect(elapsed).toBeGreaterThan(0);
    expect(elapsed).toBeGreaterThanOrEqual(REQUEST_TIMEOUT - 50);
    expect(raw.received()).toMatch(/^HTTP\/1\.1 408/);
    expect(raw.received()).toContain('"code":"REQUEST_TIMEOUT"');
  });

  it('closes a connection whose headers never finish', async () => {
    const raw = await connect(portOf(app));
    raw.socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ');
    const elapsed = await Promise.race([raw.closed, sleep(5_000).then(() => -1)]);
    expect(elapsed).toBeGreaterThan(0);
  });

  it('keeps an SSE stream open well past the request timeout', async () => {
    const user = await createVerifiedUser(app, env.smtp);
    const stream = await openStream(`http://127.0.0.1:${portOf(app)}`, user.cookie);
    try {
      await stream.waitFor((e) => e.event === 'connected');
      await sleep(REQUEST_TIMEOUT * 3);
      expect(stream.isEnded()).toBe(false);
      // Still live: a keep-alive sent after the timeouts has arrived.
      const from = stream.events.length;
      await stream.waitFor((e) => e.event === 'keep_alive', 2_000, from);
    } finally {
      stream.close();
    }
  });

  it('keeps a chat socket open well past the request timeout', async () => {
    const chat = await openChat(app);
    try {
      await sleep(REQUEST_TIMEOUT * 3);
      chat.send({ type: 'ping' });
      await chat.next('pong', undefined, 2_000);
    } finally {
      await chat.close();
    }
  });
});

describe('HTTP connections per client address', () => {
  let env: TestEnv;
  let app: App;
  const CAP = 4;
  const sockets: RawSocket[] = [];

  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app({ HTTP_MAX_CONNECTIONS_PER_IP: String(CAP) });
    await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    for (const s of sockets) s.socket.destroy();
    await env.close();
  });

  it('closes the connection beyond the cap and keeps serving once one is released', async () => {
    for (let i = 0; i < CAP; i++) sockets.push(await connect(portOf(app)));
    const extra = await connect(portOf(app));
    sockets.push(extra);
    const elapsed = await Promise.race([extra.closed, sleep(3_000).then(() => -1)]);
    expect(elapsed).toBeGreaterThanOrEqual(0);
    expect(extra.received()).toBe('');
    // The connections within the cap are still served.
    const first = sockets[0] as RawSocket;
    first.socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n');
    for (let i = 0; i < 50 && !first.received().includes('\r\n\r\n'); i++) await sleep(50);
    expect(first.received()).toMatch(/^HTTP\/1\.1 200/);
    expect(sockets.slice(0, CAP).every((s) => !s.isClosed())).toBe(true);

    // Releasing one makes room for a new connection.
    first.socket.destroy();
    await first.closed;
    for (let i = 0; i < 50; i++) {
      const probe = await connect(portOf(app));
      sockets.push(probe);
      probe.socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
      await probe.closed;
      if (probe.received().startsWith('HTTP/1.1 200')) return;
      await sleep(50);
    }
    throw new Error('no connection accepted after one was released');
  });
});

// Issue 22, carried: behind a proxy every connection comes from the proxy. With TRUST_PROXY naming it, its
// connections are not capped (the per-client limits count the forwarded client addresses instead, per request).
describe('per-address connection cap behind a trusted proxy', () => {
  let env: TestEnv;
  let app: App;
  const CAP = 2;
  const sockets: RawSocket[] = [];
  beforeAll(async () => {
    env = await createTestEnv();
    app = await env.app({ HTTP_MAX_CONNECTIONS_PER_IP: String(CAP), TRUST_PROXY: '127.0.0.1' });
    await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    for (const s of sockets) s.socket.destroy();
    await env.close();
  });

  it('serves more connections from the proxy than the cap', async () => {
    for (let i = 0; i < CAP + 3; i++) sockets.push(await connect(portOf(app)));
    const last = sockets[sockets.length - 1] as RawSocket;
    last.socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n');
    for (let i = 0; i < 100 && !last.received().includes('\r\n\r\n'); i++) await sleep(50);
    expect(last.received()).toMatch(/^HTTP\/1\.1 200/);
    expect(sockets.every((s) => !s.isClosed())).toBe(true);
  });
});
