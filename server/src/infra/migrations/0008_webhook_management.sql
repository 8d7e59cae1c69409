ALTER TABLE "webhook_endpoint" ADD COLUMN "previous_secret" text;--> statement-breakpoint
ALTER TABLE "webhook_endpoint" ADD COLUMN "previous_secret_expires_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "webhook_endpoint" ADD COLUMN "enabled" boolean DEFAULT true NOT NULL;