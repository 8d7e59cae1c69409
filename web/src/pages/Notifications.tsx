// The inbox page: the SDK's drop-in NotificationInbox (filters, pages, mark read, delete, live), in the app's
// language (its texts and dates). Action links that point into this app are followed without a reload.
import type { NotificationAction } from '@herald/client';
import { NotificationInbox } from '@herald/client/react';
import type { MouseEvent } from 'react';
import { useLocale, useTexts } from '../locale';
import { navigate } from '../router';

/** A same-origin path (`/chat`) is routed inside the app; anything else is a normal link. */
export function followAction(action: NotificationAction, event: MouseEvent<HTMLAnchorElement>): void {
  if (action.openInNewTab || !action.url.startsWith('/') || action.url.startsWith('//')) return;
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
  event.preventDefault();
  navigate(action.url);
}

export function NotificationsPage() {
  const t = useTexts();
  const locale = useLocale();
  return (
    <NotificationInbox
      title={t.titles.notifications}
      headingLevel={1}
      texts={t.inbox}
      locale={locale}
      onActionClick={(action, _notification, event) => followAction(action, event)}
    />
  );
}
