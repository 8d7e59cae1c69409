// Display of the contract's enumerations; the lists themselves come from the SDK (generated from the server).
export { NOTIFICATION_TYPES, type NotificationType } from '@herald/client';

export const typeLabel = (type: string) => type.replace('_', ' ').replace(/^./, (c) => c.toUpperCase());
