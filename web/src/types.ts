// Display of the contract's enumerations; the lists themselves come from the SDK (generated from the server).
import type { Texts } from './i18n';

export { NOTIFICATION_TYPES, type NotificationType } from '@herald/client';

/** A notification type's name in the app's language; a type the dictionary does not know is spelled out. */
export const typeLabel = (type: string, t?: Texts) => {
  const known = t && Object.hasOwn(t.types, type) ? t.types[type as keyof Texts['types']] : undefined;
  return known ?? type.replace('_', ' ').replace(/^./, (c) => c.toUpperCase());
};
