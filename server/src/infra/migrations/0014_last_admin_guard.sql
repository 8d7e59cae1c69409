-- Issue 22 (4): there is always at least one active administrator. The application's LAST_ADMIN check
-- (auth/account-rules.ts) gives the friendly answer, but check-then-act lets two admins demote or ban each other at
-- once. This trigger makes it an invariant of the table: after any change that takes an active (not banned)
-- admin away (demotion, ban, deletion; through better-auth, the CLI or plain SQL), it takes a transaction-level
-- advisory lock (released at commit, so it is safe behind PgBouncer in transaction mode) and counts the active
-- admins left, seeing every transaction that committed before it got the lock. None left → SQLSTATE HE001.
CREATE OR REPLACE FUNCTION herald_keep_one_admin() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT (OLD.role = 'admin' AND OLD.banned IS NOT TRUE) THEN
    RETURN NULL;
  END IF;
  IF TG_OP = 'UPDATE' AND NEW.role = 'admin' AND NEW.banned IS NOT TRUE THEN
    RETURN NULL;
  END IF;
  PERFORM pg_advisory_xact_lock(7262010422);
  IF NOT EXISTS (SELECT 1 FROM "user" WHERE role = 'admin' AND banned IS NOT TRUE) THEN
    RAISE EXCEPTION 'LAST_ADMIN: this is the last administrator' USING ERRCODE = 'HE001';
  END IF;
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER "user_keep_one_admin" AFTER UPDATE OF role, banned OR DELETE ON "user"
  FOR EACH ROW EXECUTE FUNCTION herald_keep_one_admin();
