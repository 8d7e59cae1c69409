CREATE TABLE "notification_cursor" (
	"user_id" text PRIMARY KEY NOT NULL,
	"last_seq" bigint DEFAULT 0 NOT NULL,
	"unread" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "notification_event" (
	"user_id" text NOT NULL,
	"seq" bigint NOT NULL,
	"kind" text NOT NULL,
	"notification_id" uuid,
	"data" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "notification_event_user_id_seq_pk" PRIMARY KEY("user_id","seq")
);
--> statement-breakpoint
DROP INDEX "notification_user_seq_idx";--> statement-breakpoint
ALTER TABLE "notification_cursor" ADD CONSTRAINT "notification_cursor_user_id_user_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."user"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "notification_event" ADD CONSTRAINT "notification_event_user_id_user_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."user"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "notification_event_created_idx" ON "notification_event" USING btree ("created_at");--> statement-breakpoint
-- Existing users start at cursor 0 with their current unread count; a client holding an old (global) cursor
-- is then ahead of the server and is told to resync.
INSERT INTO "notification_cursor" ("user_id", "last_seq", "unread")
SELECT "user_id", 0, count(*) FILTER (WHERE NOT "read") FROM "notification" GROUP BY "user_id";--> statement-breakpoint
ALTER TABLE "notification" DROP COLUMN "seq";