// Shutdown under load (CONTRACT §8 "Shutdown drains"): a real server process answering 50 keep-alive clients as
// fast as they ask (authenticated reads that wait on the store, so requests are in flight on every connection at
// once) gets SIGTERM mid-stream. Every request a client sent must end in a whole response (a 2xx, or 503
// UNAVAILABLE in the contract's shape) or in a refused connection; none may be reset or cut mid-body, and the
// process exits 0. The drain finds those requests through their connections (http/drain.ts); this is the test
// that many connections at once are all accounted for.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerifiedUserOn, startCluster, type TestCluster } from '../helpers/cluster.js';

const CLIENTS = 50;
const PATHS = ['/auth/get-session', '/notification/unread-count', '/notification/list?limit=5'];

type Outcome =
  | { kind: 'answered'; status: number; body: string; closing: boolean }
  | { kind: 'refused' }
  | { kind: 'reset'; code: string };

/** One request on a keep-alive agent; a connect refusal and a reset of a sent request are told apart. */
function request(agent: http.Agent, port: number, path: string, cookie: string): Promise<Outcome> {
  return new Promise((resolve) => {
    let connected = false;
    const req = http.request({ host: '127.0.0.1', port, path, agent, headers: { cookie } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () =>
        resolve({
          kind: 'answered',
          status: res.statusCode ?? 0,
          body,
          closing: res.headers.connection === 'close',
        }),
      );
      res.on('error', (err: NodeJS.ErrnoException) =>
        resolve({ kind: 'reset', code: err.code ?? err.message }),
      );
    });
    req.on('socket', (socket) => {
      // A reused socket is connected already; a new one reports its connect.
      if (!socket.connecting) connected = true;
      else socket.once('connect', () => (connected = true));
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (!connected && err.code === 'ECONNREFUSED') resolve({ kind: 'refused' });
      else resolve({ kind: 'reset', code: err.code ?? err.message });
    });
    req.end();
  });
}

describe('shutdown under load', () => {
  let cluster: TestCluster;
  let cookie: string;

  beforeAll(async () => {
    cluster = await startCluster({ instances: 1, env: { SHUTDOWN_GRACE_MS: '10000', LOG_LEVEL: 'info' } });
    cookie = (await createVerifiedUserOn(cluster, 0, { name: 'Load' })).cookie;
  }, 120_000);
  afterAll(async () => {
    await cluster?.close();
  });

  it('answers or refuses every request of 50 busy keep-alive clients across SIGTERM, resets none, exits 0', async () => {
    const port = cluster.port(0);
    const outcomes: Outcome[] = [];
    let stop = false;
    const client = async (n: number) => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      for (let i = n; !stop; i++) {
        const outcome = await request(agent, port, PATHS[i % PATHS.length] ?? '/health', cookie);
        outcomes.push(outcome);
        // Refused: the listener is closed, this client is done (as a balancer would move on).
        if (outcome.kind !== 'answered') break;
      }
      agent.destroy();
    };
    const clients = Array.from({ length: CLIENTS }, (_, n) => client(n));
    // Let the load build up, then stop the instance in the middle of it.
    while (outcomes.length < 2_000) await new Promise((r) => setTimeout(r, 20));
    const answeredBefore = outcomes.length;
    const exit = cluster.kill(0, 'SIGTERM');
    const exited = await exit;
    stop = true;
    await Promise.all(clients);

    const answered = outcomes.filter((o) => o.kind === 'answered');
    const resets = outcomes.filter((o) => o.kind === 'reset');
    expect(resets).toEqual([]);
    expect(exited).toEqual({ code: 0, signal: null });
    // Requests went on being answered after the signal (the ones in flight and those on open connections).
    expect(answered.length).toBeGreaterThan(answeredBefore);
    for (const o of answered) {
      if (o.kind !== 'answered') continue;
      if (o.status === 503) {
        expect(JSON.parse(o.body)).toMatchObject({ code: 'UNAVAILABLE' });
      } else {
        expect(o.status).toBe(200);
        // A whole JSON body, not one cut mid-way.
        expect(() => JSON.parse(o.body)).not.toThrow();
      }
    }
    // Every client was told to close (its last answer says `Connection: close`), then found the listener closed.
    const closing = answered.filter((o) => o.kind === 'answered' && o.closing);
    expect(closing).toHaveLength(CLIENTS);
    expect(outcomes.filter((o) => o.kind === 'refused').length).toBeGreaterThan(0);
    const lines = cluster.logs(0).join('\n');
    expect(lines).toContain('shutdown complete');
    expect(lines).not.toContain('Cannot use a pool after calling end');
  }, 120_000);
});
