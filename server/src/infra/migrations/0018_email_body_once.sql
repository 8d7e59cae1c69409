CREATE TABLE "email_body" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "email_body_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"subject" text NOT NULL,
	"text_body" text NOT NULL,
	"html_body" text NOT NULL,
	"headers" jsonb,
	"placeholder" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "email_outbox" ADD COLUMN "body_id" bigint;--> statement-breakpoint
ALTER TABLE "email_outbox" ADD COLUMN "recipient" text;--> statement-breakpoint
ALTER TABLE "email_outbox" ADD COLUMN "fill_text" text;--> statement-breakpoint
ALTER TABLE "email_outbox" ADD COLUMN "fill_html" text;--> statement-breakpoint
CREATE INDEX "email_outbox_body_idx" ON "email_outbox" USING btree ("body_id") WHERE "email_outbox"."body_id" is not null;