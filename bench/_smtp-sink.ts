// A counting SMTP sink in a process of its own (startSmtpSink of the testkit): a benchmark that runs Herald
// in-process gives its outbox worker a real SMTP server to send to without that server's parsing sharing Herald's
// event loop. The parent talks to it over the fork IPC channel: the child sends `{ port }` once listening and
// answers each `'count'` with `{ received }`.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startSmtpSink } from '@herald/server/testkit';

export interface SinkProcess {
  port: number;
  received(): Promise<number>;
  close(): void;
}

/** Starts the sink child (tsx loads this file again as the child's entry point) and waits for its port. */
export async function startSmtpSinkProcess(): Promise<SinkProcess> {
  const child = fork(fileURLToPath(import.meta.url), ['--child'], { execArgv: ['--import', 'tsx'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`smtp sink exited with ${code}`)));
  });
  return {
    port,
    received: () =>
      new Promise<number>((resolve) => {
        child.once('message', (m) => resolve((m as { received: number }).received));
        child.send('count');
      }),
    close: () => {
      child.kill();
    },
  };
}

if (process.argv.includes('--child')) {
  const sink = await startSmtpSink();
  process.on('message', () => process.send?.({ received: sink.received() }));
  process.send?.({ port: sink.port });
}
