// Owns the rules on what an account may hold, enforced by better-auth hooks on every path that writes a user
// (sign-up, magic-link sign-up, update-user, admin create-user/update-user/set-role/ban-user/remove-user):
// profile text (the name is copied into every chat message and every email greeting; its characters follow
// http/display-text.ts), image URLs, the role
// vocabulary Herald understands, and that the last administrator cannot be demoted, banned or removed.
// It also owns the checks of the request bodies of better-auth's routes (checkAuthRequestBody): the fields that
// better-auth or its plugins take without a bound or a type check, refused before anything is written.
import { APIError } from 'better-auth/api';
import { sql } from 'drizzle-orm';
import { normalizeLocale } from '../config.js';
import {
  CONTROL,
  CONTROL_MESSAGE,
  hasControl,
  hasInvisible,
  INVISIBLE,
  INVISIBLE_MESSAGE,
} from '../http/display-text.js';
import type { ErrorBody } from '../http/errors.js';
import { type Db, rowsOf } from '../infra/db.js';

export const NAME_MAX_CHARS = 64;
/**
 * The display form of the username (better-auth's username plugin, `displayUsername`): the user-name rule and
 * limit. The plugin itself bounds `username` (3–30) but not its display form, and every user field is copied into
 * the signed session snapshot cookie: 50,000 characters made ~20 cookies of 4 KB and every later request 431.
 */
export const DISPLAY_USERNAME_MAX_CHARS = NAME_MAX_CHARS;
export const IMAGE_MAX_CHARS = 2048;
/** `locale` (CONTRACT §12): the longest BCP 47 tag config.normalizeLocale accepts. */
export const LOCALE_MAX_CHARS = 35;
/** RFC 5321's limit on a forward path: no longer address can receive mail (better-auth's check has no bound). */
export const EMAIL_MAX_CHARS = 254;
/** The admin's ban reason, also part of the user (and so of the session snapshot) once set. */
export const BAN_REASON_MAX_CHARS = 500;
export const ROLES = ['user', 'admin'] as const;

const refuse = (code: string, message: string) => APIError.from('BAD_REQUEST', { code, message });

type ErrorDetail = NonNullable<ErrorBody['details']>[number];

/**
 * 400 VALIDATION_ERROR in the contract's shape (`{ code, message, details }`, as http/errors.ts validationError
 * words it). APIError.from keeps only code and message, so the body is built here.
 */
function invalidField(path: string, message: string): APIError {
  const details: ErrorDetail[] = [{ path, message }];
  return new APIError('BAD_REQUEST', { code: 'VALIDATION_ERROR', message: `${path}: ${message}`, details });
}

/**
 * The user-name rule (http/display-text.ts) on trimmed text: what is wrong with it, or null. Counted in code
 * points, so an emoji counts as one character.
 */
function nameTextProblem(text: string, maxChars: number): string | null {
  const length = [...text].length;
  if (length < 1 || length > maxChars) return `must be 1 to ${maxChars} characters`;
  if (hasControl(text)) return CONTROL_MESSAGE;
  if (hasInvisible(text)) return INVISIBLE_MESSAGE;
  return null;
}

/** The name to store (trimmed), or a 400 INVALID_NAME. */
export function validName(value: unknown): string {
  if (typeof value !== 'string') throw refuse('INVALID_NAME', 'Name must be a string');
  const name = value.trim();
  const problem = nameTextProblem(name, NAME_MAX_CHARS);
  if (problem) throw refuse('INVALID_NAME', `Name ${problem}`);
  return name;
}

/** The display username to store (trimmed, the user-name rule), or a 400 VALIDATION_ERROR naming `path`. */
export function validDisplayUsername(value: unknown, path = 'displayUsername'): string {
  if (typeof value !== 'string') throw invalidField(path, 'must be a string');
  const text = value.trim();
  const problem = nameTextProblem(text, DISPLAY_USERNAME_MAX_CHARS);
  if (problem) throw invalidField(path, problem);
  return text;
}

/**
 * A username must be a string; its length and characters are the username plugin's rule (3–30 of
 * `[a-zA-Z0-9_.]`). The plugin only checks strings: a number reached its `toLowerCase` (a 500), and a falsy one
 * (`0`, `false`, `null`) skipped every check and was stored as is (`"0"`).
 */
export function assertUsernameIsText(value: unknown, path = 'username'): void {
  if (typeof value !== 'string') throw invalidField(path, 'must be a string');
}

/** The canonical locale tag, null (clears it), or a 400 VALIDATION_ERROR naming `path`. */
export function validLocale(value: unknown, path = 'locale'): string | null {
  if (value === null) return null;
  const tag = typeof value === 'string' && value.length <= LOCALE_MAX_CHARS ? normalizeLocale(value) : null;
  if (tag === null) throw invalidField(path, 'must be a BCP 47 language tag such as en or de-AT');
  return tag;
}

/** A ban reason of at most BAN_REASON_MAX_CHARS (null clears it), or a 400 VALIDATION_ERROR naming `path`. */
export function validBanReason(value: unknown, path = 'banReason'): string | null {
  if (value === null) return null;
  if (typeof value !== 'string' || [...value].length > BAN_REASON_MAX_CHARS) {
    throw invalidField(path, `must be a string of at most ${BAN_REASON_MAX_CHARS} characters`);
  }
  return value;
}

/** The longest ban admin/ban-user accepts: 100 years of 365 days, in seconds (better-auth's unit). */
export const BAN_EXPIRES_IN_MAX_S = 100 * 365 * 24 * 60 * 60;

/**
 * `banExpiresIn` of admin/ban-user: whole seconds, 1 to BAN_EXPIRES_IN_MAX_S. better-auth adds it to now as a
 * Date without a bound, so 1e16 seconds made an invalid date and a 500 (RangeError) after the request had begun;
 * 0 fell through to a ban that never expires and -1 gave one that had already expired (a 200 that did nothing
 * lasting). A ban without an end leaves the field out.
 */
export function assertBanExpiresIn(value: unknown, path = 'banExpiresIn'): void {
  if (value === undefined) return;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > BAN_EXPIRES_IN_MAX_S) {
    throw invalidField(
      path,
      `must be a whole number of seconds from 1 to ${BAN_EXPIRES_IN_MAX_S} (100 years); leave it out for a ban without end`,
    );
  }
}

/** An email address longer than EMAIL_MAX_CHARS is refused; its form is better-auth's check. */
function assertEmailLength(value: unknown, path: string): void {
  if (typeof value === 'string' && value.length > EMAIL_MAX_CHARS) {
    throw invalidField(path, `must be at most ${EMAIL_MAX_CHARS} characters`);
  }
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The user fields better-auth takes as they come (no type or bound of its own), checked where a body sets them. */
function checkUserFields(fields: Record<string, unknown>, prefix: string): void {
  if (fields.username !== undefined) assertUsernameIsText(fields.username, `${prefix}.username`);
  if (fields.displayUsername !== undefined) {
    validDisplayUsername(fields.displayUsername, `${prefix}.displayUsername`);
  }
  if (fields.locale !== undefined) validLocale(fields.locale, `${prefix}.locale`);
  if (fields.banReason !== undefined) validBanReason(fields.banReason, `${prefix}.banReason`);
  if (fields.email !== undefined) assertEmailLength(fields.email, `${prefix}.email`);
}

/**
 * Checks the body of a better-auth route (`path` as better-auth names it, without /auth) before its handler, its
 * plugins' hooks or its database hooks run, so bad input is a 400 VALIDATION_ERROR and changes nothing. Run from
 * Herald's `hooks.before`, which better-auth calls before the plugins' hooks and the route's own schema. Fields
 * better-auth checks itself (a password's length, an email's form, the role list) are left to it; the bridge
 * already refused a body that is not a JSON object (auth/bridge.ts).
 */
export function checkAuthRequestBody(path: string, body: unknown): void {
  if (!isPlainObject(body)) return;
  switch (path) {
    case '/sign-up/email':
    case '/update-user':
      checkUserFields(body, 'body');
      return;
    case '/sign-in/magic-link':
      // The magic-link sign-up creates the user from this address when the link is followed.
      assertEmailLength(body.email, 'body.email');
      return;
    case '/sign-in/username':
    case '/is-username-available':
      assertUsernameIsText(body.username, 'body.username');
      return;
    case '/admin/create-user':
      assertEmailLength(body.email, 'body.email');
      if (isPlainObject(body.data)) checkUserFields(body.data, 'body.data');
      return;
    case '/admin/update-user':
      // better-auth hands `data` to the database as it is, without its input rules (locale included).
      if (isPlainObject(body.data)) checkUserFields(body.data, 'body.data');
      return;
    case '/admin/ban-user':
      assertBanExpiresIn(body.banExpiresIn, 'body.banExpiresIn');
      if (body.banReason !== undefined) validBanReason(body.banReason, 'body.banReason');
      return;
  }
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
