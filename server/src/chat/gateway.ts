// Owns the WebSocket endpoint GET /chat on the app's own HTTP server: every check that can refuse a client
// happens before the upgrade (path, shutdown, Origin, per-IP and per-user limits, session), then the socket is
// registered, greeted (`connected`, `message_history`, `presence`) and wired to the chat service.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import proxyaddr from '@fastify/proxy-addr';
import type { FastifyInstance } from 'fastify';
import { type WebSocket, WebSocketServer } from 'ws';
import type { AuthContext, SessionResolver } from '../auth/guard.js';
import type { Config } from '../config.js';
import { trustFunction } from '../http/proxy.js';
import type { Logger } from '../infra/logger.js';
import type { ShutdownHooks } from '../infra/shutdown.js';
import { withTimeout } from '../infra/timeout.js';
import type { ChatRole, PresenceCounts, Realtime } from '../realtime/index.js';
import type { ChatConnection, ChatHub, ChatIdentity } from './hub.js';
import type { RoomLive } from './live.js';
import { ChatErrorCode, ChatLimits, encode, GENERAL_ROOM_ID } from './protocol.js';
import type { ChatService } from './service.js';
import type { TypingThrottle } from './throttle.js';

export const CHAT_PATH = '/chat';
const RETRY_AFTER_S = 10;
const PRESENCE_TIMEOUT_MS = 1_000;

function refuse(
  socket: Duplex,
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
) {
  if (socket.destroyed) return;
  const body = JSON.stringify({ code, message });
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.once('finish', () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
      'Connection: close\r\n' +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`,
  );
}

export interface ChatGatewayDeps {
  hub: ChatHub;
  service: ChatService;
  live: RoomLive;
  typing: TypingThrottle;
  config: Config;
  sessions: SessionResolver;
  realtime: Realtime;
  lifecycle: ShutdownHooks;
  logger: Logger;
}

export function createChatGateway(app: FastifyInstance, deps: ChatGatewayDeps): void {
  const { hub, service, live, typing, config, sessions, realtime, lifecycle, logger } = deps;
  // Normalised origins (config.ts): the same list the request guards, CORS and better-auth use.
  const origins = new Set(config.trustedOrigins);
  const trust = trustFunction(config.TRUST_PROXY);
  const wss = new WebSocketServer({
    noServer: true,
    clientTracking: false,
    maxPayload: ChatLimits.MAX_FRAME_BYTES,
    perMessageDeflate: false,
  });
  // The one shutdown flag: the lifecycle's (chat's stop step runs only once it is set).
  const stopping = () => lifecycle.isShuttingDown();

  const presenceNow = async (): Promise<PresenceCounts | null> => {
    try {
      // The last refreshed counts, not a recount: a connect must not cost a walk over every member.
      return await withTimeout(realtime.presence.lastChatCounts(), PRESENCE_TIMEOUT_MS);
    } catch {
      return null;
    }
  };

  const greet = async (conn: ChatConnection, legacy: boolean) => {
    const [attached, counts] = await Promise.all([
      live.attachGeneral(conn, legacy).then(
        () => true,
        (err: unknown) => {
          logger.error({ err }, 'chat: history unavailable');
          return false;
        },
      ),
      presenceNow(),
    ]);
    if (!attached) {
      hub.sendNow(
        conn,
        encode({ type: 'error', code: ChatErrorCode.INTERNAL_ERROR, message: 'History is unavailable' }),
      );
    }
    if (counts) {
      hub.sendNow(
        conn,
        encode(
          legacy ? { type: 'presence', ...counts } : { type: 'presence', roomId: GENERAL_ROOM_ID, ...counts },
        ),
      );
    }
    hub.release(conn);
  };

  const open = (ws: WebSocket, socket: Duplex, ip: string, auth: AuthContext | null, rooms: boolean) => {
    const identity: ChatIdentity | null = auth
      ? {
          userId: auth.user.id,
          name: auth.user.name,
          image: auth.user.image,
          emailVerified: auth.user.emailVerified,
          isAdmin: auth.user.role === 'admin',
          sessionId: auth.session.id,
          sessionExpiresAt: auth.session.expiresAt.getTime(),
        }
      : null;
    const role: ChatRole = !identity ? 'guest' : identity.isAdmin ? 'admin' : 'member';
    const conn: ChatConnection = {
      id: randomUUID(),
      ws,
      socket,
      role,
      identity,
      ip,
      alive: true,
      queue: [],
      corked: false,
    };
    service.open(conn);
    hub.add(conn);
    ws.on('pong', () => {
      conn.alive = true;
    });
    ws.on('message', (data, isBinary) => {
      conn.alive = true;
      service.onFrame(conn, data, isBinary);
    });
    // ws closes the socket itself on protocol errors (1009 for oversized frames); only log here.
    ws.on('error', (err) => logger.debug({ err: err.message, connectionId: conn.id }, 'chat socket error'));
    ws.once('close', () => {
      live.detach(conn);
      if (!hub.remove(conn)) return;
      if (identity && hub.userCount(identity.userId) === 0) typing.forget(identity.userId);
    });
    hub.sendNow(
      conn,
      encode({
        type: 'connected',
        connectionId: conn.id,
        userId: identity?.userId ?? null,
        role,
        instanceId: config.INSTANCE_ID,
      }),
    );
    greet(conn, !rooms).catch((err: unknown) => {
      logger.error({ err }, 'chat: greeting failed');
      hub.release(conn);
    });
  };

  const upgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (stopping()) return refuse(socket, 503, 'UNAVAILABLE', 'Server is shutting down; reconnect later');
    const origin = req.headers.origin;
    // Browsers always send Origin on WebSocket handshakes; a missing one is refused like a foreign one so that
    // cookie-carrying cross-site upgrades can never slip through.
    if (!origin || !origins.has(origin)) return refuse(socket, 403, 'FORBIDDEN', 'Origin not allowed');
    const ip = proxyaddr(req, trust);
    const ipFull = () => hub.ipCount(ip) >= config.CHAT_MAX_CONNECTIONS_PER_IP;
    const tooMany = (what: string) =>
      refuse(socket, 429, 'RATE_LIMITED', `Too many chat connections for this ${what}`, {
        'Retry-After': String(RETRY_AFTER_S),
      });
    if (ipFull()) return tooMany('address');
    let auth: AuthContext | null = null;
    if (req.headers.cookie) {
      try {
        auth = await sessions.fromHeaders(req.headers);
      } catch (err) {
        logger.error({ err }, 'chat: session lookup failed');
        return refuse(socket, 503, 'UNAVAILABLE', 'Sessions are unavailable; reconnect later');
      }
    }
    if (socket.destroyed) return;
    if (stopping()) return refuse(socket, 503, 'UNAVAILABLE', 'Server is shutting down; reconnect later');
    // Re-checked after the await; from here to the registration in `open` everything is synchronous.
    if (ipFull()) return tooMany('address');
    if (auth && hub.userCount(auth.user.id) >= config.CHAT_MAX_CONNECTIONS_PER_USER) return tooMany('user');
    // `?rooms=1`: a §6.1 client, room-aware from the first frame (`general` with roomId and seq). Without it the
    // socket speaks §6 exactly until it sends a frame that names a room.
    const rooms = /[?&]rooms=1(?:&|$)/.test(req.url ?? '');
    wss.handleUpgrade(req, socket, head, (ws) => open(ws, socket, ip, auth, rooms));
  };

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (path !== CHAT_PATH) {
      // This is the one WebSocket endpoint: every other path is refused here. (Leaving it "to another listener"
      // when there were several left it open forever once the shutdown drain listened for upgrades too: 256 such
      // sockets used up an address's connections, and one held SIGTERM for the whole grace period.)
      refuse(socket, 404, 'NOT_FOUND', 'No WebSocket endpoint here');
      return;
    }
    // Without a listener a reset during the session lookup would be an uncaught error.
    socket.on('error', () => socket.destroy());
    upgrade(req, socket, head).catch((err: unknown) => {
      logger.error({ err }, 'chat: upgrade failed');
      refuse(socket, 500, 'INTERNAL_ERROR', 'Internal server error');
    });
  };
  app.server.on('upgrade', onUpgrade);
}
