// The chat page: the SDK's drop-in RoomList (my rooms, unread badges, create, join public rooms) next to its
// ChatRoom (history, send, edit, delete, typing, presence, read receipts; admins moderate). The room is in the URL,
// `/chat?room=<id>` (no parameter: `general`) — the link chat notifications carry (CONTRACT §6.1). Guests read
// `general` only. Side by side on wide screens; on a phone the list is behind a `Rooms` button. Both components
// speak the app's language (texts and times); the input `Message` and the button `Send` keep the contract's names.
import { ChatRoom, RoomList, useRooms } from '@herald/client/react';
import { useId, useState } from 'react';
import { FIXED } from '../i18n';
import { useLocale, useTexts } from '../locale';
import { Link, navigate, useLocation } from '../router';
import { useCurrentUser } from '../session';

const GENERAL = 'general';

export const chatPath = (roomId: string) =>
  roomId === GENERAL ? '/chat' : `/chat?room=${encodeURIComponent(roomId)}`;

export function ChatPage() {
  const { user, isPending, refetch } = useCurrentUser();
  const { query } = useLocation();
  const roomId = query.get('room') || GENERAL;
  const t = useTexts();
  const locale = useLocale();
  const signIn = <Link to={`/sign-in?next=${encodeURIComponent(chatPath(roomId))}`}>{FIXED.signIn}</Link>;
  const guestNotice = (
    <>
      {t.chat.guest} {signIn} {t.chat.toWrite}
    </>
  );
  if (!user && roomId !== GENERAL) {
    if (isPending) return <p className="muted">{t.common.loading}</p>;
    return (
      <section className="card">
        <h1>{t.titles.chat}</h1>
        <p>
          {signIn} {t.chat.toOpen}
        </p>
      </section>
    );
  }
  if (!user) {
    return (
      <div className="chat-page">
        <ChatRoom
          roomId={GENERAL}
          title={t.titles.chat}
          headingLevel={1}
          guestNotice={guestNotice}
          texts={t.chatRoom}
          locale={locale}
        />
      </div>
    );
  }
  return <MemberChat roomId={roomId} onSessionEnded={refetch} />;
}

function MemberChat({ roomId, onSessionEnded }: { roomId: string; onSessionEnded: () => void }) {
  const t = useTexts();
  const locale = useLocale();
  const [showRooms, setShowRooms] = useState(false);
  const { rooms } = useRooms();
  const listId = useId();
  const open = (id: string) => {
    setShowRooms(false);
    navigate(chatPath(id));
  };
  // Unread elsewhere, for the phone's Rooms button (the list itself is hidden there).
  const unread = rooms.reduce((n, r) => n + (r.id === roomId ? 0 : (r.unreadCount ?? 0)), 0);
  return (
    <div className={`chat-page chat-layout${showRooms ? ' show-rooms' : ''}`}>
      <button
        type="button"
        className="button secondary chat-rooms-toggle"
        aria-expanded={showRooms}
        aria-controls={listId}
        aria-label={unread > 0 ? t.roomList.unread(t.roomList.title, unread) : t.roomList.title}
        onClick={() => setShowRooms(!showRooms)}
      >
        {t.roomList.title}
        {unread > 0 ? <span className="herald-badge">{unread}</span> : null}
      </button>
      <div id={listId} className="chat-rooms">
        <RoomList selectedRoomId={roomId} onSelectRoom={open} texts={t.roomList} />
      </div>
      <div className="chat-main">
        <ChatRoom
          roomId={roomId}
          title={roomId === GENERAL ? t.titles.chat : undefined}
          headingLevel={1}
          texts={t.chatRoom}
          locale={locale}
          // Banned or signed out elsewhere: the socket was closed for it; the session is gone too.
          onSessionEnded={onSessionEnded}
          onOpenRoom={open}
        />
      </div>
    </div>
  );
}
