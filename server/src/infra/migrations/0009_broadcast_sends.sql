CREATE TABLE "broadcast_send" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"scope" text NOT NULL,
	"idempotency_key" text,
	"request_hash" text NOT NULL,
	"body" jsonb NOT NULL,
	"status" text DEFAULT 'queued' NOT NULL,
	"target_count" integer DEFAULT 0 NOT NULL,
	"created_count" integer DEFAULT 0 NOT NULL,
	"skipped_count" integer DEFAULT 0 NOT NULL,
	"failures" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"error" text,
	"attempts" integer DEFAULT 0 NOT NULL,
	"owner_instance" text,
	"heartbeat_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
CREATE UNIQUE INDEX "broadcast_send_scope_key_idx" ON "broadcast_send" USING btree ("scope","idempotency_key") WHERE "broadcast_send"."idempotency_key" is not null;--> statement-breakpoint
CREATE INDEX "broadcast_send_open_idx" ON "broadcast_send" USING btree ("created_at") WHERE "broadcast_send"."status" in ('queued', 'running');