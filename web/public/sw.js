// Herald's service worker (served at /sw.js, scope /): shows each Web Push message as a notification and, on
// click, focuses a window of the app and takes it to the notification's url (or opens one). The message is the
// JSON { id, type, title, content, url, createdAt } (docs/api.md#web-push).
/* eslint-env serviceworker */

self.addEventListener('install', () => {
  // A new version takes over at once: it only shows notifications, there is no cache to migrate.
  self.skipWaiting();
});

self.addEventListener('activate', (event) => {
  event.waitUntil(self.clients.claim());
});

function readMessage(data) {
  if (!data) return {};
  try {
    const parsed = data.json();
    return parsed && typeof parsed === 'object' ? parsed : {};
  } catch {
    return { content: data.text() };
  }
}

self.addEventListener('push', (event) => {
  const message = readMessage(event.data);
  const title = typeof message.title === 'string' && message.title ? message.title : 'New notification';
  const created = Date.parse(message.createdAt);
  event.waitUntil(
    self.registration.showNotification(title, {
      body: typeof message.content === 'string' ? message.content : '',
      // One notification per Herald notification: a retried message replaces, never duplicates.
      tag: typeof message.id === 'string' ? message.id : undefined,
      icon: '/favicon.svg',
      timestamp: Number.isNaN(created) ? Date.now() : created,
      data: { url: typeof message.url === 'string' ? message.url : '/notifications', id: message.id },
    }),
  );
});

/** The url to open: absolute against the app, and only http(s). */
function targetOf(notification) {
  try {
    const url = new URL(notification.data?.url || '/notifications', self.location.origin);
    if (url.protocol === 'http:' || url.protocol === 'https:') return url;
  } catch {
    // fall through
  }
  return new URL('/notifications', self.location.origin);
}

self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const target = targetOf(event.notification);
  event.waitUntil(
    (async () => {
      if (target.origin === self.location.origin) {
        const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
        const mine = windows.find((w) => new URL(w.url).origin === self.location.origin);
        if (mine) {
          const focused = await mine.focus();
          if (focused.url === target.href) return;
          try {
            await focused.navigate(target.href);
            return;
          } catch {
            // Not controlled by this worker (opened before it was installed): open a window instead.
          }
        }
      }
      await self.clients.openWindow(target.href);
    })(),
  );
});

// The browser replaced the subscription (expiry, key change): store the new one for the signed-in user.
self.addEventListener('pushsubscriptionchange', (event) => {
  event.waitUntil(
    (async () => {
      let subscription = event.newSubscription;
      if (!subscription && event.oldSubscription) {
        subscription = await self.registration.pushManager.subscribe(event.oldSubscription.options);
      }
      if (!subscription) return;
      await fetch('/notification/push/subscriptions', {
        method: 'POST',
        credentials: 'include',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(subscription.toJSON()),
      });
    })(),
  );
});
