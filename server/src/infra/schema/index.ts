// The single Drizzle schema: every table of every feature, used by drizzle-kit and the runtime.
export * from './admin.js';
export * from './api-keys.js';
export * from './auth.js';
export * from './chat.js';
export * from './idempotency.js';
export * from './notifications.js';
export * from './push.js';
export * from './webhooks.js';
