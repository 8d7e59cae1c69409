// A Web Push service of our own on loopback (RFC 8030), playing both the push service and the browsers behind it:
// it hands out subscriptions (a fresh P-256 key pair and auth secret per "browser"), checks every request's VAPID
// token (RFC 8292: ES256 over the application server key in `k=`, `aud` = this service's origin, `exp` at most
// 24 h ahead, `sub` mailto:/https:), decrypts the body with the browser's private key and auth secret following
// RFC 8291 step by step with node:crypto (independently of the library that encrypted it), and answers the
// statuses a test programs.
import {
  createDecipheriv,
  createECDH,
  createHmac,
  createPublicKey,
  randomBytes,
  verify as verifySignature,
} from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const b64u = (b: Buffer) => b.toString('base64url');
const unb64u = (s: string) => Buffer.from(s, 'base64url');
const hmac = (key: Buffer, data: Buffer) => createHmac('sha256', key).update(data).digest();

export interface DecryptSteps {
  ecdhSecret: Buffer;
  prkKey: Buffer;
  keyInfo: Buffer;
  ikm: Buffer;
  prk: Buffer;
  cek: Buffer;
  nonce: Buffer;
  salt: Buffer;
  recordSize: number;
  asPublic: Buffer;
  plaintext: Buffer;
}

/**
 * RFC 8291 §3.4 + RFC 8188 §2, as the browser does it: the header (salt, rs, idlen, keyid = the application
 * server's ephemeral public key), ECDH with the browser's private key, HKDF (written out with HMAC-SHA-256) for
 * IKM, then PRK, CEK and NONCE, AES-128-GCM, and the padding delimiter 0x02 of a last record.
 */
export function decryptAes128gcm(
  body: Buffer,
  ua: { privateKey: Buffer; publicKey: Buffer; authSecret: Buffer },
): DecryptSteps {
  if (body.length < 21) throw new Error('body shorter than the aes128gcm header');
  const salt = body.subarray(0, 16);
  const recordSize = body.readUInt32BE(16);
  const idlen = body[20] ?? 0;
  if (idlen !== 65) throw new Error(`keyid must be the 65-byte sender key (idlen ${idlen})`);
  const asPublic = body.subarray(21, 21 + idlen);
  const records = body.subarray(21 + idlen);
  // One record only: push messages are at most 4,096 bytes, and RFC 8291 §4 requires a single record.
  if (records.length > recordSize) throw new Error('more than one record');
  if (records.length < 17) throw new Error('record shorter than its tag');

  const ecdh = createECDH('prime256v1');
  ecdh.setPrivateKey(ua.privateKey);
  const ecdhSecret = ecdh.computeSecret(asPublic);
  // PRK_key = HMAC-SHA-256(auth_secret, ecdh_secret); IKM = HMAC-SHA-256(PRK_key, key_info || 0x01)
  const prkKey = hmac(ua.authSecret, ecdhSecret);
  const keyInfo = Buffer.concat([Buffer.from('WebPush: info\0'), ua.publicKey, asPublic]);
  const ikm = hmac(prkKey, Buffer.concat([keyInfo, Buffer.from([1])]));
  // RFC 8188: PRK = HMAC-SHA-256(salt, IKM); CEK and NONCE expanded with their info strings.
  const prk = hmac(salt, ikm);
  const cek = hmac(prk, Buffer.from('Content-Encoding: aes128gcm\0\x01', 'binary')).subarray(0, 16);
  const nonce = hmac(prk, Buffer.from('Content-Encoding: nonce\0\x01', 'binary')).subarray(0, 12);
  const decipher = createDecipheriv('aes-128-gcm', cek, nonce);
  decipher.setAuthTag(records.subarray(records.length - 16));
  const padded = Buffer.concat([decipher.update(records.subarray(0, records.length - 16)), decipher.final()]);
  let end = padded.length - 1;
  while (end >= 0 && padded[end] === 0) end--;
  if (end < 0 || padded[end] !== 2) throw new Error('last record must end with the 0x02 delimiter');
  return {
    ecdhSecret,
    prkKey,
    keyInfo,
    ikm,
    prk,
    cek,
    nonce,
    salt: Buffer.from(salt),
    recordSize,
    asPublic: Buffer.from(asPublic),
    plaintext: padded.subarray(0, end),
  };
}

export interface VapidClaims {
  aud: string;
  exp: number;
  sub: string;
}

/** Verifies `vapid t=<jwt>, k=<key>` (RFC 8292 §3): ES256 signature by `k`, and returns the claims. */
export function verifyVapid(authorization: string | undefined, expectedKey: string): VapidClaims {
  const match = /^vapid\s+t=([^,\s]+),\s*k=([A-Za-z0-9_-]+)$/.exec(authorization ?? '');
  if (!match?.[1] || !match[2]) throw new Error(`not a vapid Authorization header: ${authorization}`);
  const [, token, key] = match;
  if (key !== expectedKey) throw new Error('k= is not the application server key');
  const parts = token.split('.');
  if (parts.length !== 3) throw new Error('the token is not a JWT');
  const [h, p, s] = parts as [string, string, string];
  const header = JSON.parse(unb64u(h).toString()) as { alg?: string; typ?: string };
  if (header.alg !== 'ES256') throw new Error(`alg must be ES256, got ${header.alg}`);
  const point = unb64u(key);
  const publicKey = createPublicKey({
    key: { kty: 'EC', crv: 'P-256', x: b64u(point.subarray(1, 33)), y: b64u(point.subarray(33, 65)) },
    format: 'jwk',
  });
  const ok = verifySignature(
    'sha256',
    Buffer.from(`${h}.${p}`),
    { key: publicKey, dsaEncoding: 'ieee-p1363' },
    unb64u(s),
  );
  if (!ok) throw new Error('bad ES256 signature');
  return JSON.parse(unb64u(p).toString()) as VapidClaims;
}

export interface TestBrowser {
  /** What the browser's PushSubscription.toJSON() would give. */
  subscription: { endpoint: string; expirationTime: null; keys: { p256dh: string; auth: string } };
  privateKey: Buffer;
  publicKey: Buffer;
  authSecret: Buffer;
  token: string;
}

export interface ReceivedMessage {
  token: string;
  headers: http.IncomingHttpHeaders;
  claims: VapidClaims;
  payload: { id: string; type: string; title: string; content: string; url: string; createdAt: string };
  bodyBytes: number;
  at: number;
  status: number;
}

export interface ProgrammedAnswer {
  status: number;
  headers?: Record<string, string>;
  /** Holds the answer this long (a slow push service). */
  delayMs?: number;
}

export interface TestPushService {
  origin: string;
  port: number;
  /** A new browser subscribed to this service. */
  browser(): TestBrowser;
  /** Answers the next requests for this browser (in order); then 201. */
  program(token: string, answers: ProgrammedAnswer[]): void;
  /** Every request answered 2xx (accepted messages), in arrival order. */
  accepted: ReceivedMessage[];
  /** Every request, whatever its answer, once answered. */
  requests: ReceivedMessage[];
  /** Every valid request as soon as it arrives (before a programmed delay). */
  received: ReceivedMessage[];
  /** Requests that failed verification or decryption (a test expects none). */
  errors: string[];
  /** Resolves once `predicate` holds (checked on every request), or rejects after timeoutMs. */
  until(predicate: () => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startPushService(options: { vapidPublicKey: string }): Promise<TestPushService> {
  const browsers = new Map<string, TestBrowser>();
  const programs = new Map<string, ProgrammedAnswer[]>();
  const accepted: ReceivedMessage[] = [];
  const requests: ReceivedMessage[] = [];
  const received: ReceivedMessage[] = [];
  const errors: string[] = [];
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of waiters) w();
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const token = (req.url ?? '').replace(/^\/push\//, '');
      const browser = browsers.get(token);
      const fail = (status: number, why: string) => {
        errors.push(`${token}: ${why}`);
        res.writeHead(status).end(why);
        notify();
      };
      if (req.method !== 'POST' || !browser) return fail(404, 'no such subscription');
      const body = Buffer.concat(chunks);
      let claims: VapidClaims;
      let payload: ReceivedMessage['payload'];
      try {
        claims = verifyVapid(req.headers.authorization, options.vapidPublicKey);
        const now = Math.floor(Date.now() / 1000);
        if (claims.aud !== origin) throw new Error(`aud ${claims.aud} is not ${origin}`);
        if (!(claims.exp > now && claims.exp <= now + 24 * 3600))
          throw new Error(`exp ${claims.exp} out of range`);
        if (!/^(mailto:|https:)/.test(claims.sub ?? '')) throw new Error(`sub ${claims.sub}`);
        if (req.headers['content-encoding'] !== 'aes128gcm')
          throw new Error('Content-Encoding is not aes128gcm');
        if (!/^\d+$/.test(String(req.headers.ttl ?? ''))) throw new Error('TTL header missing');
        if (body.length > 4096) throw new Error(`body of ${body.length} bytes exceeds 4096`);
        const steps = decryptAes128gcm(body, browser);
        payload = JSON.parse(steps.plaintext.toString('utf8')) as ReceivedMessage['payload'];
      } catch (err) {
        return fail(400, (err as Error).message);
      }
      const answer = programs.get(token)?.shift() ?? { status: 201 };
      const message: ReceivedMessage = {
        token,
        headers: req.headers,
        claims,
        payload,
        bodyBytes: body.length,
        at: Date.now(),
        status: answer.status,
      };
      received.push(message);
      notify();
      const respond = () => {
        requests.push(message);
        if (answer.status >= 200 && answer.status < 300) accepted.push(message);
        res.writeHead(answer.status, answer.headers ?? {}).end();
        notify();
      };
      if (answer.delayMs) setTimeout(respond, answer.delayMs);
      else respond();
    });
  });
  // A sender killed mid-request resets its connections: the scenario some tests make, not a receiver error.
  server.on('connection', (socket) => socket.on('error', () => {}));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const origin = `http://127.0.0.1:${port}`;

  return {
    origin,
    port,
    accepted,
    requests,
    received,
    errors,
    browser() {
      const ecdh = createECDH('prime256v1');
      ecdh.generateKeys();
      const authSecret = randomBytes(16);
      const token = randomBytes(12).toString('hex');
      const b: TestBrowser = {
        token,
        privateKey: ecdh.getPrivateKey(),
        publicKey: ecdh.getPublicKey(),
        authSecret,
        subscription: {
          endpoint: `${origin}/push/${token}`,
          expirationTime: null,
          keys: { p256dh: b64u(ecdh.getPublicKey()), auth: b64u(authSecret) },
        },
      };
      browsers.set(token, b);
      return b;
    },
    program(token, answers) {
      programs.set(token, [...answers]);
    },
    until(predicate, timeoutMs = 10_000) {
      if (predicate()) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate()) return;
          cleanup();
          resolve();
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(
            new Error(
              `push service: condition not met after ${timeoutMs} ms (${requests.length} requests, errors: ${errors.join('; ') || 'none'})`,
            ),
          );
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
