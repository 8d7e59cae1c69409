// My chat rooms (CONTRACT §6.1), most recent activity first, with unread badges kept current live; create a room
// (public or private), browse and join public rooms, select one. Direct conversations start from a member's name in
// a `ChatRoom` (its `onOpenRoom`) and appear here. Every control has an accessible name (§10), in the language of
// `texts` (§10 fixes none of the list's).
import { type FormEvent, useEffect, useId, useRef, useState } from 'react';
import type { ChatRoom, ChatRoomKind } from '../contract.js';
import { useHeraldClient, useRooms } from '../hooks.js';
import { cx, errorMessage, plural } from './format.js';

/** Every text the room list shows or names a control with. Functions get the values the text carries. */
export interface RoomListTexts {
  /** The default heading, and the region's name when there is none. */
  title: string;
  empty: string;
  loading: string;
  /** A room's button while it has unread messages (otherwise its name alone). */
  unread: (room: string, count: number) => string;
  newRoom: string;
  /** The toggle and the list of public rooms to join. */
  publicRooms: string;
  roomName: string;
  visibility: string;
  kinds: Record<'public' | 'private', string>;
  create: string;
  loadingPublic: string;
  noPublic: string;
  members: (count: number) => string;
  join: string;
  joinLabel: (room: string) => string;
  /**
   * Shown for a failure whose error carries no message of its own (the SDK's errors always carry the service's,
   * which is shown as it came).
   */
  failed: string;
}

/** The room list's English texts, the default. */
export const defaultRoomListTexts: RoomListTexts = {
  title: 'Rooms',
  empty: 'No rooms yet.',
  loading: 'Loading rooms…',
  unread: (room, n) => `${room}, ${n} unread`,
  newRoom: 'New room',
  publicRooms: 'Public rooms',
  roomName: 'Room name',
  visibility: 'Visibility',
  kinds: { public: 'Public', private: 'Private' },
  create: 'Create room',
  loadingPublic: 'Loading…',
  noPublic: 'No public rooms to join.',
  members: (n) => plural(n, 'member'),
  join: 'Join',
  joinLabel: (room) => `Join ${room}`,
  failed: 'Something went wrong',
};

export interface RoomListProps {
  /** The room shown next to the list (marked as current). */
  selectedRoomId?: string;
  /** A room was chosen: picked in the list, just created, or just joined. */
  onSelectRoom: (roomId: string) => void;
  /** The list's heading (default `texts.title`, 'Rooms'); null renders none. */
  title?: string | null;
  /** Level of the heading (default 2). */
  headingLevel?: 1 | 2 | 3 | 4;
  /** Texts to use instead of the English defaults (`defaultRoomListTexts`), e.g. a translation. */
  texts?: Partial<RoomListTexts>;
  className?: string;
}

const KIND: Record<ChatRoomKind, string> = { general: '#', public: '#', private: '🔒', direct: '@' };

/**
 * The signed-in user's rooms and direct conversations with unread counts; render it inside `<HeraldProvider>`
 * next to a `ChatRoom` showing the selected room.
 *
 * @example
 * import { ChatRoom, RoomList } from '@herald/client/react';
 *
 * const [roomId, setRoomId] = useState('general');
 * <RoomList selectedRoomId={roomId} onSelectRoom={setRoomId} />
 * <ChatRoom roomId={roomId} onOpenRoom={setRoomId} />
 */
export function RoomList({
  selectedRoomId,
  onSelectRoom,
  title: titleProp,
  headingLevel = 2,
  texts,
  className,
}: RoomListProps) {
  const t = { ...defaultRoomListTexts, ...texts };
  const title = titleProp === undefined ? t.title : titleProp;
  const client = useHeraldClient();
  const { rooms, status, error, refresh } = useRooms();
  const [panel, setPanel] = useState<'create' | 'browse' | null>(null);
  const [name, setName] = useState('');
  const [kind, setKind] = useState<'public' | 'private'>('public');
  const [open, setOpen] = useState<ChatRoom[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const Heading = `h${headingLevel}` as 'h2';
  const id = useId();

  // No socket frame announces a room someone else put me in; a direct message or a mention in it arrives as a
  // notification (whenever the app keeps the feed live): reload the list when one names a room it lacks.
  const known = useRef(rooms);
  known.current = rooms;
  useEffect(() => {
    const tried = new Set<string>();
    return client.notifications.feed.subscribe((feed) => {
      for (const n of feed.items) {
        const id = (n.metadata.data as { roomId?: unknown } | undefined)?.roomId;
        if (typeof id !== 'string' || tried.has(id) || known.current.some((r) => r.id === id)) continue;
        tried.add(id);
        void refresh();
      }
    });
  }, [client, refresh]);

  const run = async (work: () => Promise<ChatRoom>) => {
    setBusy(true);
    setFailure(null);
    try {
      const room = await work();
      await refresh();
      setPanel(null);
      onSelectRoom(room.id);
      return true;
    } catch (err) {
      setFailure(errorMessage(err, t.failed));
      return false;
    } finally {
      setBusy(false);
    }
  };

  const create = async (event: FormEvent) => {
    event.preventDefault();
    const roomName = name.trim();
    if (roomName && (await run(() => client.chat.rooms.create({ name: roomName, kind })))) setName('');
  };

  const browse = async () => {
    if (panel === 'browse') return setPanel(null);
    setPanel('browse');
    setOpen(null);
    setFailure(null);
    try {
      const all = await client.chat.rooms.list('public');
      setOpen(all.filter((r) => !known.current.some((mine) => mine.id === r.id)));
    } catch (err) {
      setOpen([]);
      setFailure(errorMessage(err, t.failed));
    }
  };

  const toggle = 'herald-button herald-small herald-secondary';
  const shownError = failure ?? error?.message;
  return (
    <section className={cx('herald', 'herald-rooms', className)} aria-label={title ? undefined : t.title}>
      {title ? <Heading className="herald-title">{title}</Heading> : null}
      <ul className="herald-room-list">
        {rooms.length === 0 ? (
          <li className="herald-empty">{status === 'ready' ? t.empty : t.loading}</li>
        ) : null}
        {rooms.map((r) => {
          const unread = r.unreadCount ?? 0;
          return (
            <li key={r.id}>
              <button
                type="button"
                className={cx('herald-room', unread > 0 && 'herald-unread')}
                aria-current={r.id === selectedRoomId ? 'true' : undefined}
                aria-label={unread > 0 ? t.unread(r.name, unread) : r.name}
                onClick={() => onSelectRoom(r.id)}
              >
                <span aria-hidden="true" className="herald-muted">
                  {KIND[r.kind]}
                </span>
                <span className="herald-room-name">{r.name}</span>
                {unread > 0 ? <span className="herald-badge">{unread > 99 ? '99+' : unread}</span> : null}
              </button>
            </li>
          );
        })}
      </ul>
      <div className="herald-toolbar">
        <button
          type="button"
          className={toggle}
          aria-expanded={panel === 'create'}
          onClick={() => setPanel(panel === 'create' ? null : 'create')}
        >
          {t.newRoom}
        </button>
        <button
          type="button"
          className={toggle}
          aria-expanded={panel === 'browse'}
          onClick={() => void browse()}
        >
          {t.publicRooms}
        </button>
      </div>
      {panel === 'create' ? (
        <form className="herald-toolbar" onSubmit={(e) => void create(e)}>
          {/* Labels by `for`: a wrapping label would add the select's value to its name ("Visibility Public"). */}
          <div className="herald-field">
            <label htmlFor={`${id}n`}>{t.roomName}</label>
            <input
              id={`${id}n`}
              value={name}
              maxLength={80}
              required
              onChange={(e) => setName(e.target.value)}
            />
          </div>
          <div className="herald-field">
            <label htmlFor={`${id}k`}>{t.visibility}</label>
            <select
              id={`${id}k`}
              value={kind}
              onChange={(e) => setKind(e.target.value as 'public' | 'private')}
            >
              <option value="public">{t.kinds.public}</option>
              <option value="private">{t.kinds.private}</option>
            </select>
          </div>
          <button type="submit" className="herald-button" disabled={busy || name.trim() === ''}>
            {t.create}
          </button>
        </form>
      ) : null}
      {panel === 'browse' ? (
        <ul className="herald-room-list" aria-label={t.publicRooms}>
          {open === null || open.length === 0 ? (
            <li className="herald-empty">{open === null ? t.loadingPublic : t.noPublic}</li>
          ) : null}
          {open?.map((r) => (
            <li key={r.id} className="herald-room">
              <span className="herald-room-name">
                {r.name} <span className="herald-muted">{t.members(r.memberCount)}</span>
              </span>
              <button
                type="button"
                className="herald-button herald-small"
                aria-label={t.joinLabel(r.name)}
                disabled={busy}
                onClick={() => void run(() => client.chat.rooms.join(r.id))}
              >
                {t.join}
              </button>
            </li>
          ))}
        </ul>
      ) : null}
      {shownError ? (
        <p role="alert" className="herald-error">
          {shownError}
        </p>
      ) : null}
    </section>
  );
}
