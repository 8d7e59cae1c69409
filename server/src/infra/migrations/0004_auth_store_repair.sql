CREATE TABLE "auth_store_repair" (
	"id" text PRIMARY KEY NOT NULL,
	"key" text,
	"user_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
