// @herald/client/react: the React binding (HeraldProvider and hooks, hooks.tsx) and the drop-in components
// (NotificationBell, NotificationInbox, ChatRoom, RoomList), styled by `@herald/client/styles.css`. See client/README.md.
export {
  ChatRoom,
  type ChatRoomProps,
  type ChatRoomTexts,
  defaultChatRoomTexts,
  GENERAL_ROOM,
} from './components/ChatRoom.js';
export {
  type BellTexts,
  defaultBellTexts,
  NotificationBell,
  type NotificationBellProps,
} from './components/NotificationBell.js';
export {
  defaultInboxTexts,
  type InboxFilter,
  type InboxTexts,
  NotificationInbox,
  type NotificationInboxProps,
} from './components/NotificationInbox.js';
export {
  defaultRoomListTexts,
  RoomList,
  type RoomListProps,
  type RoomListTexts,
} from './components/RoomList.js';
export {
  HeraldProvider,
  type SessionState,
  useChat,
  useHeraldClient,
  useNotifications,
  useRoom,
  useRooms,
  useSession,
  useUnreadCount,
} from './hooks.js';
