// Owns this instance's chat sockets: the connection registry (by id, user and IP), fan-out of pre-encoded
// events with its write coalescing, the server ping loop that terminates dead peers, and the slow-consumer guard.
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import type { Logger } from '../infra/logger.js';
import type { ChatRole, Presence } from '../realtime/index.js';
import { CloseCode } from './protocol.js';
import { COALESCE_MIN_FRAMES_PER_SECOND, createWriteBatch } from './write-batch.js';

export interface ChatIdentity {
  userId: string;
  name: string;
  image: string | null;
  emailVerified: boolean;
  isAdmin: boolean;
  sessionId: string;
  sessionExpiresAt: number;
}

export interface ChatConnection {
  readonly id: string;
  readonly ws: WebSocket;
  /** The upgraded TCP socket under `ws`, corked while a fan-out batch is being written (until the next flush). */
  readonly socket: Duplex;
  readonly role: ChatRole;
  readonly identity: ChatIdentity | null;
  readonly ip: string;
  /** Set by any frame or pong from the peer; cleared by each ping round. */
  alive: boolean;
  /** Events held back while `connected`/`message_history` are being sent, so ordering holds. */
  queue: Buffer[] | null;
  corked: boolean;
}

// Events that may wait behind the initial history; beyond this the connection is not keeping up.
const MAX_QUEUED = 1_000;
// After a close frame, how long a peer gets to complete the handshake before the socket is destroyed.
const CLOSE_GRACE_MS = 1_000;
export interface ChatHub {
  /** Registers the socket and counts it in presence (chatJoin). */
  add(conn: ChatConnection): void;
  /** Unregisters the socket and takes it out of presence (chatLeave); false when it was not registered. */
  remove(conn: ChatConnection): boolean;
  readonly size: number;
  all(): IterableIterator<ChatConnection>;
  ofUser(userId: string): ChatConnection[];
  ipCount(ip: string): number;
  userCount(userId: string): number;
  /** Sends to one socket (queued while the socket is initialising). */
  send(conn: ChatConnection, data: Buffer): void;
  /** Sends bypassing the initialisation queue (the initial frames themselves). */
  sendNow(conn: ChatConnection, data: Buffer): void;
  /** Sends to one socket as part of a fan-out (corked with its other fan-out frames until the next flush). */
  push(conn: ChatConnection, data: Buffer): void;
  /** Sends the same bytes to every local socket except `exceptId`. */
  broadcast(data: Buffer, exceptId?: string): void;
  /** Ends the initialisation phase: flushes held-back events in order. */
  release(conn: ChatConnection): void;
  close(conn: ChatConnection, code: number, reason: string): void;
  /** Closes every socket with `code` and resolves when all are gone (destroying stragglers after a grace). */
  closeAll(code: number, reason: string, graceMs: number): Promise<void>;
  stop(): void;
  stats(): {
    slowConsumersClosed: number;
    deadPeersTerminated: number;
    fanoutFrames: number;
    socketWrites: number;
  };
}

export interface ChatHubOptions {
  /** Chat presence accounting: a socket counts from add() to remove(). */
  presence: Pick<Presence, 'chatJoin' | 'chatLeave'>;
  pingIntervalMs: number;
  sendBufferLimitBytes: number;
  logger: Logger;
  /**
   * Duration of each flush of fan-out writes (the frames of one message to every local socket it reaches, or of
   * several under coalescing), for the Prometheus histogram: the writes happen there, not where frames are queued.
   */
  onFlushSeconds?: (seconds: number) => void;
  /**
   * Under load, the least time between two flushes of fan-out writes (CHAT_COALESCE_MS): frames of several
   * messages to one socket then leave in one write, each waiting at most this long. 0: flush every turn.
   */
  coalesceMs?: number;
  /** Load threshold in fan-out frames per second (COALESCE_MIN_FRAMES_PER_SECOND; tests lower it). */
  coalesceMinFramesPerSecond?: number;
  /** After each flush: fan-out frames handed to sockets and socket writes since the previous call (metrics). */
  onWrites?: (frames: number, writes: number) => void;
}

export function createChatHub(options: ChatHubOptions): ChatHub {
  const { logger, sendBufferLimitBytes } = options;
  // Fan-out writes are corked per socket and flushed together; under load, frames of several messages share a
  // flush (write-batch.ts). Direct replies and close frames uncork their socket at once, behind what is corked.
  const batch = createWriteBatch({
    coalesceMs: options.coalesceMs ?? 0,
    minFramesPerSecond: options.coalesceMinFramesPerSecond ?? COALESCE_MIN_FRAMES_PER_SECOND,
    onWrites: options.onWrites,
    onFlushSeconds: options.onFlushSeconds,
    sockets: () => connections.size,
  });
  const connections = new Map<string, ChatConnection>();
  const byUser = new Map<string, Set<ChatConnection>>();
  const byIp = new Map<string, number>();
  let slowConsumersClosed = 0;
  let deadPeersTerminated = 0;

  const closeWithGrace = (conn: ChatConnection, code: number, reason: string) => {
    const { ws } = conn;
    if (ws.readyState === ws.CLOSED) return;
    if (ws.readyState !== ws.CLOSING) {
      try {
        ws.close(code, reason);
      } catch {
        ws.terminate();
        return;
      }
      // The close frame (behind any fan-out frames still corked) leaves now, not at the next flush.
      batch.uncorkNow(conn);
    }
    // A peer that never answers the close frame (or never reads) must not pin the socket and its buffers.
    setTimeout(() => {
      if (ws.readyState !== ws.CLOSED) ws.terminate();
    }, CLOSE_GRACE_MS).unref();
  };

  const slowConsumer = (conn: ChatConnection) => {
    slowConsumersClosed++;
    logger.warn(
      { connectionId: conn.id, bufferedAmount: conn.ws.bufferedAmount },
      'chat: closing slow consumer',
    );
    closeWithGrace(conn, CloseCode.POLICY, 'slow consumer');
  };

  const write = (conn: ChatConnection, data: Buffer) => {
    const { ws } = conn;
    if (ws.readyState !== ws.OPEN) return;
    // Bounded memory: a peer that does not read stops receiving and is closed, instead of growing the buffer.
    // While corked the buffer also holds the batch since the last flush, which was checked when the batch began.
    if (!conn.corked && ws.bufferedAmount > sendBufferLimitBytes) {
      slowConsumer(conn);
      return;
    }
    ws.send(data, { binary: false });
  };
  /** A direct reply: written behind the corked fan-out frames, and sent now rather than at the next flush. */
  const writeNow = (conn: ChatConnection, data: Buffer) => {
    write(conn, data);
    batch.uncorkNow(conn);
  };

  const deliver = (conn: ChatConnection, data: Buffer, now: boolean) => {
    if (conn.queue) {
      if (conn.queue.length >= MAX_QUEUED) {
        conn.queue = null;
        slowConsumer(conn);
        return;
      }
      conn.queue.push(data);
      return;
    }
    if (now) writeNow(conn, data);
    else write(conn, data);
  };
  /** One fan-out frame to one socket: corks it at the start of a batch, after the slow-consumer check. */
  const pushFrame = (conn: ChatConnection, data: Buffer) => {
    if (!conn.corked && !conn.queue && conn.ws.readyState === conn.ws.OPEN) {
      if (conn.ws.bufferedAmount > sendBufferLimitBytes) {
        slowConsumer(conn);
        return;
      }
      batch.cork(conn);
    }
    batch.countFrame();
    deliver(conn, data, false);
  };

  const ping = setInterval(() => {
    for (const conn of connections.values()) {
      const { ws } = conn;
      if (ws.readyState !== ws.OPEN) continue;
      if (!conn.alive) {
        deadPeersTerminated++;
        ws.terminate();
        continue;
      }
      conn.alive = false;
      try {
        ws.ping();
      } catch {
        ws.terminate();
      }
    }
  }, options.pingIntervalMs);
  ping.unref();

  return {
    add(conn) {
      connections.set(conn.id, conn);
      byIp.set(conn.ip, (byIp.get(conn.ip) ?? 0) + 1);
      if (conn.identity) {
        let set = byUser.get(conn.identity.userId);
        if (!set) {
          set = new Set();
          byUser.set(conn.identity.userId, set);
        }
        set.add(conn);
      }
      options.presence.chatJoin(conn.id, conn.role, conn.identity?.userId ?? null);
    },
    remove(conn) {
      if (!connections.delete(conn.id)) return false;
      options.presence.chatLeave(conn.id);
      const n = (byIp.get(conn.ip) ?? 1) - 1;
      if (n <= 0) byIp.delete(conn.ip);
      else byIp.set(conn.ip, n);
      if (conn.identity) {
        const set = byUser.get(conn.identity.userId);
        set?.delete(conn);
        if (set?.size === 0) byUser.delete(conn.identity.userId);
      }
      conn.queue = null;
      return true;
    },
    get size() {
      return connections.size;
    },
    all: () => connections.values(),
    ofUser: (userId) => [...(byUser.get(userId) ?? [])],
    ipCount: (ip) => byIp.get(ip) ?? 0,
    userCount: (userId) => byUser.get(userId)?.size ?? 0,
    send: (conn, data) => deliver(conn, data, true),
    sendNow: writeNow,
    push: pushFrame,
    broadcast(data, exceptId) {
      for (const conn of connections.values()) {
        if (conn.id !== exceptId) pushFrame(conn, data);
      }
    },
    release(conn) {
      const queued = conn.queue;
      conn.queue = null;
      if (queued) for (const data of queued) write(conn, data);
      batch.uncorkNow(conn);
    },
    close: closeWithGrace,
    async closeAll(code, reason, graceMs) {
      const open = [...connections.values()];
      await Promise.all(
        open.map(
          (conn) =>
            new Promise<void>((resolve) => {
              const { ws } = conn;
              if (ws.readyState === ws.CLOSED) return resolve();
              const timer = setTimeout(() => {
                ws.terminate();
                resolve();
              }, graceMs);
              timer.unref();
              ws.once('close', () => {
                clearTimeout(timer);
                resolve();
              });
              if (ws.readyState !== ws.CLOSING) {
                try {
                  ws.close(code, reason);
                } catch {
                  ws.terminate();
                }
              }
            }),
        ),
      );
    },
    stop() {
      clearInterval(ping);
      // Shutdown follows: what waits for a coalesced flush leaves now.
      batch.flushNow();
    },
    stats: () => ({ slowConsumersClosed, deadPeersTerminated, ...batch.stats() }),
  };
}
