ALTER TABLE "idempotency_key" ADD COLUMN "owner_instance" text;--> statement-breakpoint
ALTER TABLE "idempotency_key" ADD COLUMN "heartbeat_at" timestamp with time zone;