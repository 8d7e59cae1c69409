// My chat rooms (CONTRACT §6.1), most recent activity first, with unread badges kept current live; create a room
// (public or private), browse and join public rooms, select one. Direct conversations start from a member's name in
// a `ChatRoom` (its `onOpenRoom`) and appear here. Every control has an accessible name (§10).
import { type FormEvent, useEffect, useId, useRef, useState } from 'react';
import type { ChatRoom, ChatRoomKind } from '../contract.js';
import { useHeraldClient, useRooms } from '../hooks.js';
import { cx, errorMessage, plural } from './format.js';

export interface RoomListProps {
  /** The room shown next to the list (marked as current). */
  selectedRoomId?: string;
  /** A room was chosen: picked in the list, just created, or just joined. */
  onSelectRoom: (roomId: string) => void;
  /** The list's heading (default 'Rooms'); null renders none. */
  title?: string | null;
  /** Level of the heading (default 2). */
  headingLevel?: 1 | 2 | 3 | 4;
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
  title = 'Rooms',
  headingLevel = 2,
  className,
}: RoomListProps) {
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

  const run = async (work: () => Promise<ChatRoom>, failed: string) => {
    setBusy(true);
    setFailure(null);
    try {
      const room = await work();
      await refresh();
      setPanel(null);
      onSelectRoom(room.id);
      return true;
    } catch (err) {
      setFailure(errorMessage(err, failed));
      return false;
    } finally {
      setBusy(false);
    }
  };

  const create = async (event: FormEvent) => {
    event.preventDefault();
    const roomName = name.trim();
    if (roomName && (await run(() => client.chat.rooms.create({ name: roomName, kind }), 'Could not create')))
      setName('');
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
      setFailure(errorMessage(err, 'Could not load public rooms'));
    }
  };

  const toggle = 'herald-button herald-small herald-secondary';
  const shownError = failure ?? error?.message;
  return (
    <section className={cx('herald', 'herald-rooms', className)} aria-label={title ? undefined : 'Rooms'}>
      {title ? <Heading className="herald-title">{title}</Heading> : null}
      <ul className="herald-room-list">
        {rooms.length === 0 ? (
          <li className="herald-empty">{status === 'ready' ? 'No rooms yet.' : 'Loading rooms…'}</li>
        ) : null}
        {rooms.map((r) => {
          const unread = r.unreadCount ?? 0;
          return (
            <li key={r.id}>
              <button
                type="button"
                className={cx('herald-room', unread > 0 && 'herald-unread')}
                aria-current={r.id === selectedRoomId ? 'true' : undefined}
                aria-label={unread > 0 ? `${r.name}, ${unread} unread` : r.name}
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
          New room
        </button>
        <button
          type="button"
          className={toggle}
          aria-expanded={panel === 'browse'}
          onClick={() => void browse()}
        >
          Public rooms
        </button>
      </div>
      {panel === 'create' ? (
        <form className="herald-toolbar" onSubmit={(e) => void create(e)}>
          {/* Labels by `for`: a wrapping label would add the select's value to its name ("Visibility Public"). */}
          <div className="herald-field">
            <label htmlFor={`${id}n`}>Room name</label>
            <input
              id={`${id}n`}
              value={name}
              maxLength={80}
              required
              onChange={(e) => setName(e.target.value)}
            />
          </div>
          <div className="herald-field">
            <label htmlFor={`${id}k`}>Visibility</label>
            <select
              id={`${id}k`}
              value={kind}
              onChange={(e) => setKind(e.target.value as 'public' | 'private')}
            >
              <option value="public">Public</option>
              <option value="private">Private</option>
            </select>
          </div>
          <button type="submit" className="herald-button" disabled={busy || name.trim() === ''}>
            Create room
          </button>
        </form>
      ) : null}
      {panel === 'browse' ? (
        <ul className="herald-room-list" aria-label="Public rooms">
          {open === null || open.length === 0 ? (
            <li className="herald-empty">{open === null ? 'Loading…' : 'No public rooms to join.'}</li>
          ) : null}
          {open?.map((r) => (
            <li key={r.id} className="herald-room">
              <span className="herald-room-name">
                {r.name} <span className="herald-muted">{plural(r.memberCount, 'member')}</span>
              </span>
              <button
                type="button"
                className="herald-button herald-small"
                aria-label={`Join ${r.name}`}
                disabled={busy}
                onClick={() => void run(() => client.chat.rooms.join(r.id), 'Could not join')}
              >
                Join
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
