-- Issue 27 (6): the outbox and digest claims read `order by next_attempt_at, id limit 20`, but their partial
-- indexes held next_attempt_at alone. Rows queued by one statement (a broadcast's batch, a digest window) share
-- next_attempt_at, so every claim of 20 sorted the whole backlog (Seq Scan + Sort, 90 ms at 100,000 pending rows):
-- a drain slowed down as its backlog grew. With the claim's order in the index the claim reads its 20 rows off it.
DROP INDEX "email_outbox_due_idx";--> statement-breakpoint
CREATE INDEX "email_outbox_due_idx" ON "email_outbox" USING btree ("next_attempt_at","id") WHERE "email_outbox"."status" = 'pending';--> statement-breakpoint
DROP INDEX "email_digest_due_idx";--> statement-breakpoint
CREATE INDEX "email_digest_due_idx" ON "email_digest" USING btree ("next_attempt_at","id") WHERE "email_digest"."status" = 'pending';
