// The in-run baseline of `compare`: a bare Fastify process (same Node, default options, no hooks, no logging)
// answering GET requests with JSON bodies held in memory (path without query → body, from BODIES_FILE). Fastify
// serialises each body per request with JSON.stringify, like any route returning an object without a schema.
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';

const bodies = JSON.parse(readFileSync(process.env.BODIES_FILE ?? '', 'utf8')) as Record<string, unknown>;
const app = Fastify();
for (const [path, body] of Object.entries(bodies)) app.get(path, async () => body);
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
const stop = () => {
  void app.close().then(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
