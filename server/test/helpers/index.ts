// The test kit: the helpers that bench/, client/ and web/ share with the server's own tests, published by this
// workspace as `@herald/server/testkit` so nothing outside server/ reaches into server/test by relative path.
export * from './app.js';
export * from './cluster.js';
export * from './db.js';
export * from './env.js';
export * from './logs.js';
export * from './pg-replica.js';
export * from './pgbouncer.js';
export * from './push-service.js';
export * from './redis-cluster.js';
export * from './redis-server.js';
export * from './smtp.js';
export * from './sse-client.js';
export * from './users.js';
export * from './webhook-receiver.js';
export * from './ws-client.js';
