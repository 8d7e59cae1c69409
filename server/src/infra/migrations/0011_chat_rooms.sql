CREATE TABLE "chat_member" (
	"room_id" text NOT NULL,
	"user_id" text NOT NULL,
	"role" text DEFAULT 'member' NOT NULL,
	"last_read_seq" bigint DEFAULT 0 NOT NULL,
	"joined_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "chat_member_room_id_user_id_pk" PRIMARY KEY("room_id","user_id"),
	CONSTRAINT "chat_member_role_ck" CHECK ("chat_member"."role" in ('owner', 'member'))
);
--> statement-breakpoint
CREATE TABLE "chat_room" (
	"id" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"name" text NOT NULL,
	"created_by" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_seq" bigint DEFAULT 0 NOT NULL,
	"last_rev" bigint DEFAULT 0 NOT NULL,
	"last_message_at" timestamp with time zone,
	"member_count" integer DEFAULT 0 NOT NULL,
	"members_version" bigint DEFAULT 0 NOT NULL,
	"direct_key" text,
	CONSTRAINT "chat_room_kind_ck" CHECK ("chat_room"."kind" in ('general', 'public', 'private', 'direct'))
);
--> statement-breakpoint
CREATE TABLE "chat_room_event" (
	"room_id" text NOT NULL,
	"rev" bigint NOT NULL,
	"kind" text NOT NULL,
	"seq" bigint NOT NULL,
	"message_id" uuid NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "chat_room_event_room_id_rev_pk" PRIMARY KEY("room_id","rev")
);
--> statement-breakpoint
DROP INDEX IF EXISTS "chat_message_created_idx";--> statement-breakpoint
DROP INDEX IF EXISTS "chat_message_created_desc_idx";--> statement-breakpoint
DROP INDEX IF EXISTS "chat_message_seq_idx";--> statement-breakpoint
ALTER TABLE "chat_message" ALTER COLUMN "seq" DROP IDENTITY;--> statement-breakpoint
ALTER TABLE "chat_message" ALTER COLUMN "seq" SET DEFAULT 0;--> statement-breakpoint
ALTER TABLE "chat_message" ADD COLUMN "room_id" text DEFAULT 'general' NOT NULL;--> statement-breakpoint
ALTER TABLE "chat_message" ADD COLUMN "rev" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
-- The seed's chat becomes the room `general`: existing messages keep their order (created_at, then the old
-- global sequence) and are numbered 1..n, each one's creation being revision n of the room.
INSERT INTO "chat_room" ("id", "kind", "name") VALUES ('general', 'general', 'General');--> statement-breakpoint
UPDATE "chat_message" AS m SET "seq" = o."rn", "rev" = o."rn"
FROM (SELECT "id", row_number() OVER (ORDER BY "created_at", "seq") AS "rn" FROM "chat_message") AS o
WHERE m."id" = o."id";--> statement-breakpoint
UPDATE "chat_room" SET "last_seq" = s."n", "last_rev" = s."n", "last_message_at" = s."at"
FROM (SELECT count(*) AS "n", max("created_at") AS "at" FROM "chat_message") AS s
WHERE "chat_room"."id" = 'general';--> statement-breakpoint
ALTER TABLE "chat_member" ADD CONSTRAINT "chat_member_room_id_chat_room_id_fk" FOREIGN KEY ("room_id") REFERENCES "public"."chat_room"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "chat_member" ADD CONSTRAINT "chat_member_user_id_user_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."user"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "chat_room" ADD CONSTRAINT "chat_room_created_by_user_id_fk" FOREIGN KEY ("created_by") REFERENCES "public"."user"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "chat_room_event" ADD CONSTRAINT "chat_room_event_room_id_chat_room_id_fk" FOREIGN KEY ("room_id") REFERENCES "public"."chat_room"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "chat_member_user_idx" ON "chat_member" USING btree ("user_id");--> statement-breakpoint
CREATE UNIQUE INDEX "chat_room_direct_key_uq" ON "chat_room" USING btree ("direct_key");--> statement-breakpoint
CREATE INDEX "chat_room_public_idx" ON "chat_room" USING btree ("kind","last_message_at");--> statement-breakpoint
CREATE INDEX "chat_room_event_created_idx" ON "chat_room_event" USING btree ("created_at");--> statement-breakpoint
ALTER TABLE "chat_message" ADD CONSTRAINT "chat_message_room_id_chat_room_id_fk" FOREIGN KEY ("room_id") REFERENCES "public"."chat_room"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "chat_message_room_seq_uq" ON "chat_message" USING btree ("room_id","seq");--> statement-breakpoint
CREATE INDEX "chat_message_room_rev_idx" ON "chat_message" USING btree ("room_id","rev");--> statement-breakpoint
CREATE INDEX "chat_message_room_created_idx" ON "chat_message" USING btree ("room_id","created_at" DESC NULLS FIRST,"seq" DESC NULLS FIRST);--> statement-breakpoint
-- A row inserted without seq/rev (0, the default: a manual insert, a seeding script) is numbered here, under the
-- room row's lock like the repository's own insert, so seqs stay contiguous whoever writes.
CREATE FUNCTION "chat_message_assign_seq"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "chat_room" SET "last_seq" = "last_seq" + 1, "last_rev" = "last_rev" + 1,
    "last_message_at" = greatest("last_message_at", NEW."created_at")
  WHERE "id" = NEW."room_id"
  RETURNING "last_seq", "last_rev" INTO NEW."seq", NEW."rev";
  RETURN NEW;
END
$$;--> statement-breakpoint
CREATE TRIGGER "chat_message_assign_seq" BEFORE INSERT ON "chat_message"
FOR EACH ROW WHEN (NEW."seq" = 0) EXECUTE FUNCTION "chat_message_assign_seq"();
