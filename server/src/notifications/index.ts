// Registers the notifications feature's routes. Owned by the notifications issue.
import type { FastifyInstance } from 'fastify';

export function registerNotifications(_app: FastifyInstance): void {}
