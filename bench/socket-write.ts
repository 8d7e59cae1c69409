// What one stream write costs on this machine, alone (issue 27 target 5): N open HTTP responses held by a client in
// another process (keep-alive, reading and discarding), then one broadcast's worth of writes, timed. This is the
// floor under the SSE fan-out's per-stream cost, without Herald, PostgreSQL, Redis or an SSE parser around it.
//   response-two  — what an SSE stream does per broadcast: two events (`new_notification`, `unread_count_changed`)
//                   as two ServerResponse writes, chunked, corked by Node until the next tick (one writev);
//   response-one  — the two events as one write;
//   socket        — the same bytes framed by hand and written to the socket directly (no ServerResponse).
// Printed per mode and round: wall time per stream from the first write until the corked writes have gone out, and
// the process's user and system CPU per stream.
//
// Usage: npm run bench -- socket-write [--streams 5000] [--rounds 3]
import { fork } from 'node:child_process';
import http, { type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { machineLoad, numberArg, printTable } from './_lib.js';

const STREAMS = numberArg('streams', 5000);
const ROUNDS = numberArg('rounds', 3);
const MODES = ['response-two', 'response-one', 'socket'] as const;
type Mode = (typeof MODES)[number];

// The client side: open `n` streams to the port and read them until killed.
if (process.argv[2] === '--client') {
  const port = Number(process.argv[3]);
  const n = Number(process.argv[4]);
  const agent = new http.Agent({ keepAlive: true, maxSockets: n });
  let opened = 0;
  const open = (): void => {
    if (opened++ >= n) return;
    http.get({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
      res.on('data', () => {});
      open();
    });
  };
  for (let k = 0; k < 50; k++) open();
} else {
  await main();
}

async function main(): Promise<void> {
  const event = (name: string, data: object) =>
    `id: 12345\nevent: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
  const first = event('new_notification', {
    id: '5b0e7a56-3f59-4a4e-9a51-7c1d3c2f8e10',
    userId: 'b123',
    type: 'info',
    title: 'Notification 123',
    content: 'Body of notification 123: 5d41402abc4b2a76b9719d911017c592',
    metadata: {},
    read: false,
    createdAt: '2026-11-28T12:00:00.123Z',
    updatedAt: '2026-11-28T12:00:00.123Z',
  });
  const second = event('unread_count_changed', { unreadCount: 3 });
  const both = first + second;
  const chunk = `${Buffer.byteLength(both).toString(16)}\r\n${both}\r\n`;

  const responses: ServerResponse[] = [];
  let allOpen: () => void = () => {};
  const opened = new Promise<void>((resolve) => (allOpen = resolve));
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    res.socket?.setNoDelay(true);
    res.write(': stream open\n\n');
    responses.push(res);
    if (responses.length === STREAMS) allOpen();
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  const client = fork(fileURLToPath(import.meta.url), ['--client', String(port), String(STREAMS)], {
    execArgv: ['--import', 'tsx'],
  });
  await opened;
  await new Promise((resolve) => setTimeout(resolve, 1000));
  console.log(`${STREAMS} streams open; ${machineLoad()}`);

  const writeAll: Record<Mode, () => void> = {
    'response-two': () => {
      for (const r of responses) {
        r.write(first);
        r.write(second);
      }
    },
    'response-one': () => {
      for (const r of responses) r.write(both);
    },
    socket: () => {
      for (const r of responses) r.socket?.write(chunk);
    },
  };
  const rows: Array<Record<string, string | number>> = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const mode of MODES) {
      const cpu0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      writeAll[mode]();
      // Corked response writes go out on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      const wallUs = Number(process.hrtime.bigint() - t0) / 1000;
      const cpu = process.cpuUsage(cpu0);
      rows.push({
        round,
        mode,
        'µs per stream (wall)': Number((wallUs / STREAMS).toFixed(1)),
        'user CPU µs': Number((cpu.user / STREAMS).toFixed(1)),
        'system CPU µs': Number((cpu.system / STREAMS).toFixed(1)),
      });
      // Let the client drain before the next mode.
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
  printTable(rows, `one write per stream to ${STREAMS} open HTTP responses on loopback`);
  client.kill();
  for (const r of responses) r.destroy();
  server.close();
}
