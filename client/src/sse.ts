// An incremental parser of the text/event-stream format (WHATWG HTML "server-sent events"): bytes may be split
// anywhere (inside a line, a CRLF pair or a multi-byte UTF-8 character); lines end with CRLF, LF or CR.

export interface SseMessage {
  /** The last event id seen so far on this stream (the `id:` of this event or an earlier one), or null. */
  id: string | null;
  /** `event:` field; 'message' when absent. */
  event: string;
  /** `data:` lines joined with "\n". */
  data: string;
}

/**
 * An incremental `text/event-stream` parser (what the feed reads the stream with).
 * @example
 * const parser = new SseParser();
 * for (const message of parser.push(chunkText)) console.log(message.event, message.data);
 */
export class SseParser {
  private readonly decoder = new TextDecoder('utf-8');
  private buffer = '';
  /** The previous chunk ended with CR: a LF at the start of the next one belongs to the same line break. */
  private pendingCR = false;
  private data: string[] = [];
  private eventName = '';
  private lastEventId: string | null = null;
  /** Reconnection time the server asked for (`retry:`), if any. */
  retryMs: number | null = null;

  constructor(initialLastEventId: string | null = null) {
    this.lastEventId = initialLastEventId;
  }

  /** Feeds a chunk and returns the events it completed. */
  push(chunk: Uint8Array | string): SseMessage[] {
    let text = typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    if (this.pendingCR && text.startsWith('\n')) text = text.slice(1);
    this.pendingCR = false;
    this.buffer += text;
    const out: SseMessage[] = [];
    let start = 0;
    for (let i = 0; i < this.buffer.length; i++) {
      const ch = this.buffer.charCodeAt(i);
      if (ch !== 10 && ch !== 13) continue;
      const line = this.buffer.slice(start, i);
      if (ch === 13) {
        if (i + 1 < this.buffer.length) {
          if (this.buffer.charCodeAt(i + 1) === 10) i++;
        } else {
          this.pendingCR = true;
        }
      }
      start = i + 1;
      const message = this.line(line);
      if (message) out.push(message);
    }
    this.buffer = this.buffer.slice(start);
    return out;
  }

  private line(line: string): SseMessage | null {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return null; // comment
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'data':
        this.data.push(value);
        break;
      case 'event':
        this.eventName = value;
        break;
      case 'id':
        if (!value.includes('\u0000')) this.lastEventId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retryMs = Number(value);
        break;
      default:
        break;
    }
    return null;
  }

  private dispatch(): SseMessage | null {
    const name = this.eventName || 'message';
    this.eventName = '';
    if (this.data.length === 0) return null;
    const data = this.data.join('\n');
    this.data = [];
    return { id: this.lastEventId, event: name, data };
  }
}
