// Owns GET /metrics (JSON and Prometheus). Owned by the real-time core issue.
import type { FastifyInstance } from 'fastify';

export function registerMetrics(_app: FastifyInstance): void {}
