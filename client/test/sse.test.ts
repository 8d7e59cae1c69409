import { describe, expect, it } from 'vitest';
import { type SseMessage, SseParser } from '../src/sse.js';

const enc = new TextEncoder();

/** Feeds `bytes` cut at every given offset. */
function feed(parser: SseParser, bytes: Uint8Array, cuts: number[]): SseMessage[] {
  const out: SseMessage[] = [];
  let prev = 0;
  for (const cut of [...cuts, bytes.length]) {
    out.push(...parser.push(bytes.subarray(prev, cut)));
    prev = cut;
  }
  return out;
}

const STREAM =
  'id: 1\nevent: connected\ndata: {"type":"connected","unreadCount":2}\n\n' +
  ': comment\r\n' +
  'id: 2\r\nevent: new_notification\r\ndata: {"type":"new_notification",\r\ndata: "title":"héllo ✓ 👋"}\r\n\r\n' +
  'id: 3\revent: keep_alive\rdata: {"type":"keep_alive"}\r\r';

const EXPECTED: SseMessage[] = [
  { id: '1', event: 'connected', data: '{"type":"connected","unreadCount":2}' },
  { id: '2', event: 'new_notification', data: '{"type":"new_notification",\n"title":"héllo ✓ 👋"}' },
  { id: '3', event: 'keep_alive', data: '{"type":"keep_alive"}' },
];

describe('SSE parser', () => {
  it('parses a whole stream with LF, CRLF and CR line ends and multi-line data', () => {
    expect(new SseParser().push(enc.encode(STREAM))).toEqual(EXPECTED);
  });

  it('gives the same events however the bytes are split (inside CRLF pairs and UTF-8 characters too)', () => {
    const bytes = enc.encode(STREAM);
    for (let i = 1; i < bytes.length; i++) {
      expect(feed(new SseParser(), bytes, [i])).toEqual(EXPECTED);
    }
    // Byte by byte.
    expect(
      feed(
        new SseParser(),
        bytes,
        Array.from({ length: bytes.length - 1 }, (_, i) => i + 1),
      ),
    ).toEqual(EXPECTED);
  });

  it('keeps the last id across events, ignores comments, unknown fields and data-less events', () => {
    const p = new SseParser('7');
    expect(p.push('event: a\ndata\n\nfoo: bar\n:x\nevent: b\n\nretry: 1500\ndata:no-space\n\n')).toEqual([
      { id: '7', event: 'a', data: '' },
      { id: '7', event: 'message', data: 'no-space' },
    ]);
    expect(p.retryMs).toBe(1500);
  });

  it('holds an incomplete event until its blank line arrives', () => {
    const p = new SseParser();
    expect(p.push('id: 5\ndata: {"a":')).toEqual([]);
    expect(p.push('1}\n')).toEqual([]);
    expect(p.push('\n')).toEqual([{ id: '5', event: 'message', data: '{"a":1}' }]);
  });
});
