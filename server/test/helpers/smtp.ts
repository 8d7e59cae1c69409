// A real SMTP server (smtp-server) in-process that captures and parses every message.
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export interface CapturedMail {
  to: string[];
  /** The From header as sent (display name and address). */
  from: string;
  subject: string;
  text: string;
  html: string;
  /** Header lines by lower-case name, values unfolded (the last one when repeated). */
  headers: Record<string, string>;
}

export interface TestSmtp {
  port: number;
  messages: CapturedMail[];
  /** Resolves with the first captured (or future) message matching the predicate. */
  waitFor(predicate: (m: CapturedMail) => boolean, timeoutMs?: number): Promise<CapturedMail>;
  /** Makes the server refuse every message (simulates an SMTP outage) until called with false. */
  setFailing(failing: boolean): void;
  close(): Promise<void>;
}

function addresses(parsed: ParsedMail): string[] {
  const to = parsed.to;
  const list = Array.isArray(to) ? to : to ? [to] : [];
  return list.flatMap((a) => a.value.map((v) => (v.address ?? '').toLowerCase()));
}

export interface SmtpOptions {
  /** Require SMTP AUTH with these credentials (PLAIN/LOGIN over the plain connection). */
  auth?: { user: string; pass: string };
}

export async function startSmtp(options: SmtpOptions = {}): Promise<TestSmtp> {
  const messages: CapturedMail[] = [];
  const waiters: Array<{ predicate: (m: CapturedMail) => boolean; resolve: (m: CapturedMail) => void }> = [];
  let failing = false;
  const server = new SMTPServer({
    authOptional: options.auth === undefined,
    // Without TLS in tests; otherwise smtp-server refuses AUTH on a plain connection.
    allowInsecureAuth: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onAuth(auth, _session, callback) {
      const expected = options.auth;
      if (expected && auth.username === expected.user && auth.password === expected.pass) {
        callback(null, { user: auth.username });
        return;
      }
      if (!expected) {
        callback(null, { user: auth.username ?? 'anonymous' });
        return;
      }
      callback(Object.assign(new Error('Invalid username or password'), { responseCode: 535 }));
    },
    onData(stream, _session, callback) {
      if (failing) {
        stream.resume();
        stream.on('end', () =>
          callback(Object.assign(new Error('Service unavailable'), { responseCode: 451 })),
        );
        return;
      }
      simpleParser(stream).then(
        (parsed) => {
          const headers: Record<string, string> = {};
          for (const { key, line } of parsed.headerLines) {
            headers[key.toLowerCase()] = line
              .slice(line.indexOf(':') + 1)
              .replace(/\r?\n[ \t]+/g, ' ')
              .trim();
          }
          const mail: CapturedMail = {
            to: addresses(parsed),
            from: headers.from ?? '',
            headers,
            subject: parsed.subject ?? '',
            text: parsed.text ?? '',
            html: typeof parsed.html === 'string' ? parsed.html : '',
          };
          messages.push(mail);
          for (const w of [...waiters]) {
            if (w.predicate(mail)) {
              waiters.splice(waiters.indexOf(w), 1);
              w.resolve(mail);
            }
          }
          callback();
        },
        (err: Error) => callback(err),
      );
    },
  });
  // Senders keep pooled SMTP connections open; an instance a test kills (SIGKILL) resets them. smtp-server reports
  // that as an 'error' event, which with no listener would be an uncaught exception in the test process.
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    messages,
    waitFor(predicate, timeoutMs = 10_000) {
      const found = messages.find(predicate);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const waiter = { predicate, resolve };
        waiters.push(waiter);
        setTimeout(() => {
          const i = waiters.indexOf(waiter);
          if (i >= 0) {
            waiters.splice(i, 1);
            reject(new Error('timed out waiting for an email'));
          }
        }, timeoutMs).unref();
      });
    },
    setFailing(value) {
      failing = value;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Extracts the token of the first FE link to `page` (verify-email, reset-password, magic-link) in a mail. */
export function tokenFrom(mail: CapturedMail, page: string): string {
  const match = mail.text.match(new RegExp(`/${page}\\?token=([^\\s&]+)`));
  if (!match?.[1]) throw new Error(`no ${page} link in mail "${mail.subject}"`);
  return decodeURIComponent(match[1]);
}

/** A counting SMTP server for benchmarks: accepts every message and discards it unparsed. */
export interface SmtpSink {
  port: number;
  /** Messages accepted so far. */
  received(): number;
  /** performance.timeOrigin + performance.now() of the first and the latest accepted message (NaN before one). */
  firstAt(): number;
  lastAt(): number;
  close(): Promise<void>;
}

/**
 * Parsing and keeping every message (startSmtp) costs the bench process more CPU per email than the server's
 * send does, on the same cores: a drain measured against it would measure the capture. This sink only counts.
 */
export async function startSmtpSink(): Promise<SmtpSink> {
  let received = 0;
  let first = Number.NaN;
  let last = Number.NaN;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, callback) {
      stream.resume();
      stream.on('end', () => {
        received++;
        last = performance.timeOrigin + performance.now();
        if (Number.isNaN(first)) first = last;
        callback();
      });
    },
  });
  // Senders keep pooled SMTP connections open; an instance a test kills (SIGKILL) resets them. smtp-server reports
  // that as an 'error' event, which with no listener would be an uncaught exception in the test process.
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    received: () => received,
    firstAt: () => first,
    lastAt: () => last,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
