// Owns the rules on what an account may hold, enforced by better-auth hooks on every path that writes a user
// (sign-up, magic-link sign-up, update-user, admin create-user/update-user/set-role/ban-user/remove-user):
// profile text (the name is copied into every chat message and every email greeting; its characters follow
// http/display-text.ts), image URLs, the role
// vocabulary Herald understands, and that the last administrator cannot be demoted, banned or removed.
import { APIError } from 'better-auth/api';
import { sql } from 'drizzle-orm';
import { CONTROL, hasControl, hasInvisible, INVISIBLE } from '../http/display-text.js';
import { type Db, rowsOf } from '../infra/db.js';

export const NAME_MAX_CHARS = 64;
export const IMAGE_MAX_CHARS = 2048;
export const ROLES = ['user', 'admin'] as const;

const refuse = (code: string, message: string) => APIError.from('BAD_REQUEST', { code, message });

/** The name to store (trimmed), or a 400 INVALID_NAME. */
export function validName(value: unknown): string {
  if (typeof value !== 'string') throw refuse('INVALID_NAME', 'Name must be a string');
  const name = value.trim();
  // Counted in code points, so an emoji counts as one character.
  const length = [...name].length;
  if (length < 1 || length > NAME_MAX_CHARS) {
    throw refuse('INVALID_NAME', `Name must be 1 to ${NAME_MAX_CHARS} characters`);
  }
  if (hasControl(name)) {
    throw refuse('INVALID_NAME', 'Name must be a single line without control characters');
  }
  if (hasInvisible(name)) {
    throw refuse('INVALID_NAME', 'Name must not contain invisible or text-direction control characters');
  }
  return name;
}

/** null/undefined (no image) or an https URL of at most IMAGE_MAX_CHARS; otherwise a 400 INVALID_IMAGE. */
export function validImage(value: unknown): string | null | undefined {
  if (value === null || value === undefined) return value;
  const message = `Image must be an https URL of at most ${IMAGE_MAX_CHARS} characters`;
  if (typeof value !== 'string' || value.length > IMAGE_MAX_CHARS || CONTROL.test(value)) {
    throw refuse('INVALID_IMAGE', message);
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw refuse('INVALID_IMAGE', message);
  }
  if (url.protocol !== 'https:' || url.username || url.password) throw refuse('INVALID_IMAGE', message);
  return url.href;
}

/**
 * Herald knows exactly two roles. better-auth's admin plugin also accepts lists ("admin,user", ["admin","user"])
 * and treats any list containing "admin" as an administrator, while Herald's checks compare the role to
 * "admin": refusing anything else keeps both views of who is an administrator the same.
 */
export function validRole(value: unknown): (typeof ROLES)[number] {
  if (typeof value === 'string' && (ROLES as readonly string[]).includes(value)) {
    return value as (typeof ROLES)[number];
  }
  throw refuse('INVALID_ROLE', `Role must be exactly one of: ${ROLES.join(', ')}`);
}

/**
 * Profile text from a social provider is not the user's typed input: it is made to fit instead of refusing the
 * sign-in (one line, control characters dropped, cut to the limit; a non-https picture is dropped).
 */
export function fitProviderProfile(name: unknown, image: unknown): { name: string; image: string | null } {
  const raw = typeof name === 'string' ? name : '';
  const visible = raw
    .replace(new RegExp(CONTROL.source, 'gu'), ' ')
    .replace(new RegExp(INVISIBLE.source, 'gu'), '');
  const cleaned = [
    ...(hasInvisible(visible) ? visible.replace(/[\u200c\u200d]/g, '') : visible).replace(/\s+/g, ' ').trim(),
  ]
    .slice(0, NAME_MAX_CHARS)
    .join('')
    .trim();
  let fitted: string | null = null;
  try {
    fitted = validImage(image) ?? null;
  } catch {
    fitted = null;
  }
  return { name: cleaned || 'User', image: fitted };
}

/** SQLSTATE raised by the database's last-admin trigger (migration 0008_last_admin_guard). */
export const LAST_ADMIN_SQLSTATE = 'HE001';

/** True when `err` (or an error it wraps: drizzle, better-auth's adapter) is the last-admin trigger's refusal. */
export function isLastAdminViolation(err: unknown): boolean {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && current !== null && typeof current === 'object'; depth++) {
    if ((current as { code?: unknown }).code === LAST_ADMIN_SQLSTATE) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

export const LAST_ADMIN_MESSAGE = 'This is the last administrator: promote another user first';

/**
 * 400 LAST_ADMIN when `userId` is the only active (not banned) administrator. Called before a demotion, a ban or
 * a removal, so the deployment always keeps someone able to administer it (the CLI can still create one). This
 * is the friendly answer only: two such requests at once can both pass it, and the database trigger of migration
 * 0008 (serialised by a transaction-level advisory lock) refuses the second; the bridge maps that to the same 400.
 */
export async function assertNotLastAdmin(db: Db, userId: string): Promise<void> {
  const [row] = rowsOf<{ target_is_admin: boolean; others: number }>(
    await db.execute(
      sql`select
            exists (select 1 from "user" where id = ${userId} and role = 'admin' and banned is not true)
              as target_is_admin,
            (select count(*)::int from "user" where id <> ${userId} and role = 'admin' and banned is not true)
              as others`,
    ),
  );
  if (row?.target_is_admin && row.others === 0) {
    throw refuse('LAST_ADMIN', LAST_ADMIN_MESSAGE);
  }
}
