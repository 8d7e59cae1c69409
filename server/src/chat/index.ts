// Registers the chat feature's routes. Owned by the chat issue.
import type { FastifyInstance } from 'fastify';

export function registerChat(_app: FastifyInstance): void {}
