// The chat page: the SDK's drop-in ChatRoom (history, send, edit, delete, typing, presence; admins moderate).
import { ChatRoom } from '@herald/client/react';
import { Link } from '../router';
import { useCurrentUser } from '../session';

export function ChatPage() {
  const { refetch } = useCurrentUser();
  return (
    <div className="chat-page">
      <ChatRoom
        roomId="general"
        title="Chat"
        headingLevel={1}
        // Banned or signed out elsewhere: the socket was closed for it; the session is gone too.
        onSessionEnded={refetch}
        guestNotice={
          <>
            You are reading as a guest. <Link to="/sign-in?next=%2Fchat">Sign in</Link> to write.
          </>
        }
      />
    </div>
  );
}
