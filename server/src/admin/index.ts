// Registers the admin feature's routes. Owned by the admin issue.
import type { FastifyInstance } from 'fastify';

export function registerAdmin(_app: FastifyInstance): void {}
