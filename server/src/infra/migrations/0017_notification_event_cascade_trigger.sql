-- Issue 27: the event log's foreign key to "user" checked every event row (two per user in a broadcast batch), ~15 %
-- of the batch statement. Every writer of notification_event bumps the user's notification_cursor row in the same
-- transaction first, and a user's deletion must delete that cursor row (its own cascade) and so waits for any such
-- transaction to commit; the statement trigger below then deletes the user's events with a snapshot that sees them.
ALTER TABLE "notification_event" DROP CONSTRAINT "notification_event_user_id_user_id_fk";
--> statement-breakpoint
CREATE OR REPLACE FUNCTION herald_delete_notification_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM notification_event e USING gone g WHERE e.user_id = g.id;
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER "user_delete_notification_events" AFTER DELETE ON "user"
  REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION herald_delete_notification_events();
