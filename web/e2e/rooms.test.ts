// Rooms in the web app (CONTRACT §6.1, §10) in Chromium against two real Herald processes: Alice (instance 0, a
// desktop window) starts a direct conversation from Bob's name in a message and writes; Bob (instance 1, a phone)
// sees the unread badge, opens the conversation, and Alice sees the read receipt. Alice creates a public room,
// Bob joins it from the public list. The URL names the room (/chat?room=<id>); the layout is checked at 1280 px
// (list and room side by side) and 375 px (the list behind the Rooms button). No console errors.
import type { TestCluster } from '@herald/server/testkit';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConsoleWatch,
  DESKTOP,
  launchBrowser,
  PHONE,
  screenshot,
  signInContext,
  startWebCluster,
  verifiedUser,
} from './harness';

type Box = { x: number; y: number; width: number; height: number } | null;
const overlaps = (a: Box, b: Box) =>
  a !== null &&
  b !== null &&
  a.x < b.x + b.width &&
  b.x < a.x + a.width &&
  a.y < b.y + b.height &&
  b.y < a.y + a.height;
const inside = (a: Box, viewport: { width: number; height: number }) =>
  a !== null && a.x >= 0 && a.y >= 0 && a.x + a.width <= viewport.width && a.y + a.height <= viewport.height;

describe('rooms and direct messages in the web app', () => {
  let cluster: TestCluster;
  let browser: Browser;
  const contexts: BrowserContext[] = [];
  const watch = new ConsoleWatch();

  const signedInPage = async (index: number, name: string, viewport: typeof DESKTOP): Promise<Page> => {
    const user = await verifiedUser(cluster, index, name);
    const context = await browser.newContext({ viewport });
    watch.attach(context);
    contexts.push(context);
    await signInContext(context, cluster.url(index), user);
    const page = await context.newPage();
    await page.goto(`${cluster.url(index)}/chat`);
    await page.getByLabel('Message', { exact: true }).waitFor();
    return page;
  };

  /** Text in the room's message log (a notification toast may quote the same message). */
  const inLog = (page: Page, text: string) => page.getByRole('log', { name: 'Messages' }).getByText(text);
  const roomOf = (page: Page) => new URL(page.url()).searchParams.get('room');

  beforeAll(async () => {
    [cluster, browser] = await Promise.all([startWebCluster(), launchBrowser()]);
  });

  afterAll(async () => {
    await Promise.allSettled(contexts.map((c) => c.close()));
    await browser?.close();
    await cluster?.close();
  });

  it('DM from a name, unread badge, read receipt, public room join; at 1280 and 375 px', async () => {
    const alice = await signedInPage(0, 'Alice', DESKTOP);
    const bob = await signedInPage(1, 'Bob', PHONE);

    // Desktop: the room list and the room side by side; the list names general, the current room.
    const general = alice.getByRole('button', { name: 'General', exact: true });
    await general.waitFor();
    expect(await general.getAttribute('aria-current')).toBe('true');
    expect(await alice.getByRole('button', { name: 'Rooms', exact: true }).isVisible()).toBe(false);
    const [list, log] = await Promise.all([
      alice.locator('.chat-rooms').boundingBox(),
      alice.getByRole('log', { name: 'Messages' }).boundingBox(),
    ]);
    expect(list && log && list.x + list.width <= log.x, 'list left of the room at 1280 px').toBe(true);
    expect(overlaps(list, log)).toBe(false);

    // Phone: the room fills the screen, its composer in view; the list is behind the Rooms button.
    const toggle = bob.getByRole('button', { name: /^Rooms/ });
    await toggle.waitFor();
    expect(await bob.locator('.chat-rooms').isVisible()).toBe(false);
    for (const control of [
      bob.getByLabel('Message', { exact: true }),
      bob.getByRole('button', { name: 'Send', exact: true }),
    ])
      expect(inside(await control.boundingBox(), PHONE), 'composer inside the 375 px screen').toBe(true);

    // Bob writes in general; Alice starts a direct conversation from his name in that message.
    await bob.getByLabel('Message', { exact: true }).fill('Hello from the phone');
    await bob.getByRole('button', { name: 'Send', exact: true }).click();
    const bobsMessage = alice.getByTestId('chat-message').filter({ hasText: 'Hello from the phone' });
    await bobsMessage.getByRole('button', { name: 'Start a direct message with Bob', exact: true }).click();
    await alice.getByRole('heading', { level: 1, name: 'Bob' }).waitFor();
    const dm = roomOf(alice);
    expect(dm).toMatch(/^[0-9a-f-]{36}$/);
    await alice.getByRole('button', { name: 'Bob', exact: true }).waitFor();
    await alice.getByLabel('Message', { exact: true }).fill('Just between us');
    await alice.getByRole('button', { name: 'Send', exact: true }).click();
    await inLog(alice, 'Just between us').waitFor();

    // Bob (on general, another instance) learns of the conversation and its unread message.
    await bob.getByRole('button', { name: 'Rooms, 1 unread', exact: true }).waitFor();
    await toggle.click();
    expect(await toggle.getAttribute('aria-expanded')).toBe('true');
    expect(await bob.getByLabel('Message', { exact: true }).isVisible()).toBe(false);
    const dmButton = bob.getByRole('button', { name: 'Alice, 1 unread', exact: true });
    await dmButton.waitFor();
    expect(await dmButton.locator('.herald-badge').textContent()).toBe('1');
    await screenshot(bob, 'rooms-list-375');
    await dmButton.click();
    await inLog(bob, 'Just between us').waitFor();
    expect(roomOf(bob)).toBe(dm);
    await bob.getByRole('heading', { level: 1, name: 'Alice' }).waitFor();

    // Seen: Alice's message carries the receipt; Bob's badge is gone.
    await alice
      .getByTestId('chat-message')
      .filter({ hasText: 'Just between us' })
      .getByText('Seen', { exact: true })
      .waitFor();
    await bob.getByRole('button', { name: 'Rooms', exact: true }).waitFor();
    await screenshot(alice, 'rooms-dm-1280');
    await screenshot(bob, 'rooms-dm-375');

    // The URL is the room: a reload opens the same conversation.
    await bob.reload();
    await inLog(bob, 'Just between us').waitFor();

    // Alice creates a public room; Bob finds it among the public rooms and joins.
    await alice.getByRole('button', { name: 'New room', exact: true }).click();
    await alice.getByLabel('Room name', { exact: true }).fill('Lobby');
    await alice.getByLabel('Visibility', { exact: true }).selectOption('public');
    await alice.getByRole('button', { name: 'Create room', exact: true }).click();
    await alice.getByRole('heading', { level: 1, name: 'Lobby' }).waitFor();
    const lobby = roomOf(alice);
    expect(lobby).not.toBe(dm);
    await alice.getByLabel('Message', { exact: true }).fill('Welcome to the lobby');
    await alice.getByRole('button', { name: 'Send', exact: true }).click();
    await inLog(alice, 'Welcome to the lobby').waitFor();

    await bob.getByRole('button', { name: /^Rooms/ }).click();
    await bob.getByRole('button', { name: 'Public rooms', exact: true }).click();
    await bob.getByRole('button', { name: 'Join Lobby', exact: true }).click();
    await inLog(bob, 'Welcome to the lobby').waitFor();
    expect(roomOf(bob)).toBe(lobby);
    await bob.getByLabel('Message', { exact: true }).fill('Thanks for having me');
    await bob.getByRole('button', { name: 'Send', exact: true }).click();
    await inLog(alice, 'Thanks for having me').waitFor();

    // Both sizes of both layouts, for the record (e2e/artifacts/).
    await screenshot(alice, 'rooms-public-1280');
    await alice.setViewportSize(PHONE);
    await alice.getByRole('button', { name: /^Rooms/ }).waitFor();
    await screenshot(alice, 'rooms-public-375');
    await bob.setViewportSize(DESKTOP);
    await bob.getByRole('button', { name: 'Lobby', exact: true }).waitFor();
    await screenshot(bob, 'rooms-public-bob-1280');

    // A signed-out visitor with the room's link is asked to sign in and sent back to the room.
    const guest = await browser.newContext({ viewport: PHONE });
    watch.attach(guest);
    contexts.push(guest);
    const visitor = await guest.newPage();
    await visitor.goto(`${cluster.url(1)}/chat?room=${lobby}`);
    const signIn = visitor.getByRole('main').getByRole('link', { name: 'Sign in', exact: true });
    await signIn.waitFor();
    expect(await signIn.getAttribute('href')).toBe(
      `/sign-in?next=${encodeURIComponent(`/chat?room=${lobby}`)}`,
    );
    expect(await visitor.getByText('Welcome to the lobby').count()).toBe(0);

    expect(watch.errors, watch.failed.join('\n')).toEqual([]);
  });
});
