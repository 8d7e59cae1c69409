// Runtime lists of the contract's enumerations, checked against the SDK's types (derived from the server's
// schemas): a value the server does not know fails to compile, and so does a missing one.
import type { Notification } from '@herald/client';

export type NotificationType = Notification['type'];

export const NOTIFICATION_TYPES = [
  'system',
  'message',
  'friend_request',
  'mention',
  'announcement',
  'warning',
  'success',
  'info',
] as const satisfies readonly NotificationType[];

type MissingType = Exclude<NotificationType, (typeof NOTIFICATION_TYPES)[number]>;
const everyType: [MissingType] extends [never] ? true : MissingType = true;
void everyType;

export const typeLabel = (type: string) => type.replace('_', ' ').replace(/^./, (c) => c.toUpperCase());
