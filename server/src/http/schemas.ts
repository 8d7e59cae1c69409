// Owns the HTTP vocabulary every route schema shares: the error body and the NUL rule.
import { z } from 'zod';

/** The error body of every non-2xx JSON response (docs/api.md#errors). */
export const ErrorSchema = z.object({
  code: z.string(),
  message: z.string(),
  details: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
});

/** PostgreSQL text and jsonb cannot hold U+0000: refuse it up front (400) instead of failing the query (500). */
export const noNul = (s: string) => !s.includes('\u0000');
