// The test push service's own RFC 8291 decryptor checked against the RFC's example (§5 and Appendix A), then
// used on what Herald's message builder (the web-push library) produces; the VAPID token's claims; the payload's
// size limit, Urgency and Topic; how answers are classified.
import { createECDH } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { type Config, generateVapidKeys } from '../../src/config.js';
import { createMessageBuilder, VAPID_TOKEN_SECONDS } from '../../src/push/message.js';
import {
  buildPayload,
  cutUtf8,
  MAX_PLAINTEXT_BYTES,
  payloadUrl,
  topicOf,
  urgencyOf,
} from '../../src/push/payload.js';
import { classify, retryAfterMs } from '../../src/push/worker.js';
import { pushTransport } from '../../src/root/outbound.js';
import { decryptAes128gcm, verifyVapid } from '../helpers/push-service.js';

const u = (s: string) => Buffer.from(s, 'base64url');

// RFC 8291 §5 "Push Message Encryption Example" and Appendix A's intermediate values.
const RFC = {
  plaintext: 'When I grow up, I want to be a watermelon',
  asPublic: 'BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8',
  uaPrivate: 'q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94',
  uaPublic: 'BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4',
  authSecret: 'BTBZMqHH6r4Tts7J_aSIgg',
  salt: 'DGv6ra1nlYgDCS1FRnbzlw',
  ecdhSecret: 'kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs',
  prkKey: 'Snr3JMxaHVDXHWJn5wdC52WjpCtd2EIEGBykDcZW32k',
  keyInfo:
    'V2ViUHVzaDogaW5mbwAEJXGyvs3942BVGq8e0PTNNmwRzr5VX4m8t7GGpTM5FzFo7OLr4BhZe9MEebhuPI-OztV3ylkYfpJGmQ22ggCLDgT-M_SrDepxkU21WCP3O1SUj0EwbZIHMtu5pZpTKGSCIA5Zent7wmC6HCJ5mFgJkuk5cwAvMBKiiujwa7t45ewP',
  ikm: 'S4lYMb_L0FxCeq0WhDx813KgSYqU26kOyzWUdsXYyrg',
  prk: '09_eUZGrsvxChDCGRCdkLiDXrReGOEVeSCdCcPBSJSc',
  cek: 'oIhVW04MRdy2XN9CiKLxTg',
  nonce: '4h_95klXJ5E_qnoN',
  body: 'DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN',
};

const browser = () => {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return {
    privateKey: ecdh.getPrivateKey(),
    publicKey: ecdh.getPublicKey(),
    authSecret: Buffer.from('0123456789abcdef'),
  };
};

describe('RFC 8291 decryption (the test push service)', () => {
  it('decrypts the RFC example with the RFC intermediate values', () => {
    const steps = decryptAes128gcm(u(RFC.body), {
      privateKey: u(RFC.uaPrivate),
      publicKey: u(RFC.uaPublic),
      authSecret: u(RFC.authSecret),
    });
    expect(steps.plaintext.toString()).toBe(RFC.plaintext);
    expect(steps.salt.toString('base64url')).toBe(RFC.salt);
    expect(steps.recordSize).toBe(4096);
    expect(steps.asPublic.toString('base64url')).toBe(RFC.asPublic);
    expect(steps.ecdhSecret.toString('base64url')).toBe(RFC.ecdhSecret);
    expect(steps.prkKey.toString('base64url')).toBe(RFC.prkKey);
    expect(steps.keyInfo.toString('base64url')).toBe(RFC.keyInfo);
    expect(steps.ikm.toString('base64url')).toBe(RFC.ikm);
    expect(steps.prk.toString('base64url')).toBe(RFC.prk);
    expect(steps.cek.toString('base64url')).toBe(RFC.cek);
    expect(steps.nonce.toString('base64url')).toBe(RFC.nonce);
  });

  it('refuses a tampered body and a wrong auth secret', () => {
    const keys = { privateKey: u(RFC.uaPrivate), publicKey: u(RFC.uaPublic), authSecret: u(RFC.authSecret) };
    const tampered = u(RFC.body);
    tampered[tampered.length - 20] = (tampered[tampered.length - 20] ?? 0) ^ 1;
    expect(() => decryptAes128gcm(tampered, keys)).toThrow();
    expect(() => decryptAes128gcm(u(RFC.body), { ...keys, authSecret: Buffer.alloc(16) })).toThrow();
  });
});

describe('message builder (web-push) against the independent decryptor', () => {
  const vapid = { ...generateVapidKeys(), subject: 'mailto:ops@example.com' };

  it('encrypts for the browser and signs a VAPID token for the push service origin', () => {
    const b = browser();
    const builder = createMessageBuilder(vapid);
    const plaintext = Buffer.from('{"hello":"world"}');
    const before = Math.floor(Date.now() / 1000);
    const req = builder.build(
      {
        endpoint: 'https://push.example.com:8443/send/abc?x=1',
        p256dh: b.publicKey.toString('base64url'),
        auth: b.authSecret.toString('base64url'),
      },
      plaintext,
      { ttlSeconds: 600, urgency: 'high', topic: topicOf('0f5b3c1e-7a2d-4e8f-9b6a-3c2d1e0f9a8b') },
    );
    expect(decryptAes128gcm(req.body, b).plaintext.toString()).toBe('{"hello":"world"}');
    expect(req.headers['content-encoding']).toBe('aes128gcm');
    expect(req.headers.ttl).toBe('600');
    expect(req.headers.urgency).toBe('high');
    expect(req.headers.topic).toBe('0f5b3c1e7a2d4e8f9b6a3c2d1e0f9a8b');
    const claims = verifyVapid(req.headers.authorization, vapid.publicKey);
    expect(claims.aud).toBe('https://push.example.com:8443');
    expect(claims.sub).toBe('mailto:ops@example.com');
    expect(claims.exp).toBeGreaterThan(before);
    expect(claims.exp).toBeLessThanOrEqual(before + VAPID_TOKEN_SECONDS + 1);
    expect(VAPID_TOKEN_SECONDS).toBeLessThanOrEqual(24 * 3600);
    // Another key would not verify.
    expect(() => verifyVapid(req.headers.authorization, generateVapidKeys().publicKey)).toThrow();
  });

  it('reuses a token per audience for a while, and signs one per push service', () => {
    let now = Date.now();
    const builder = createMessageBuilder(vapid, () => now);
    const b = browser();
    const sub = (endpoint: string) => ({
      endpoint,
      p256dh: b.publicKey.toString('base64url'),
      auth: b.authSecret.toString('base64url'),
    });
    const opts = { ttlSeconds: 60, urgency: 'normal' as const, topic: 'abc' };
    const a1 = builder.build(sub('https://a.example/1'), Buffer.from('x'), opts).headers.authorization;
    const a2 = builder.build(sub('https://a.example/2'), Buffer.from('x'), opts).headers.authorization;
    const b1 = builder.build(sub('https://b.example/1'), Buffer.from('x'), opts).headers.authorization;
    expect(a2).toBe(a1);
    expect(b1).not.toBe(a1);
    now += 2 * 3600 * 1000;
    const a3 = builder.build(sub('https://a.example/3'), Buffer.from('x'), opts).headers.authorization;
    expect(a3).not.toBe(a1);
  });

  it('a maximal payload encrypts to at most 4,096 bytes', () => {
    const b = browser();
    const payload = buildPayload(
      {
        id: '0f5b3c1e-7a2d-4e8f-9b6a-3c2d1e0f9a8b',
        type: 'announcement',
        title: '😀'.repeat(255),
        content: 'ü"\\'.repeat(2000),
        metadata: { actions: [{ url: `/x/${'a'.repeat(2000)}` }] },
        createdAt: new Date().toISOString(),
      },
      'https://app.example.com',
    );
    expect(payload.length).toBeLessThanOrEqual(MAX_PLAINTEXT_BYTES);
    const parsed = JSON.parse(payload.toString()) as { content: string; title: string };
    expect(parsed.content.endsWith('…')).toBe(true);
    expect(parsed.title).toBe('😀'.repeat(255));
    const req = createMessageBuilder(vapid).build(
      {
        endpoint: 'https://p.example/x',
        p256dh: b.publicKey.toString('base64url'),
        auth: b.authSecret.toString('base64url'),
      },
      payload,
      { ttlSeconds: 1, urgency: 'low', topic: 'abc' },
    );
    expect(req.body.length).toBeLessThanOrEqual(4096);
    expect(JSON.parse(decryptAes128gcm(req.body, b).plaintext.toString())).toEqual(parsed);
  });
});

describe('payload fields and answers', () => {
  it('url: the first action made absolute, else the notifications page', () => {
    expect(payloadUrl({ actions: [{ url: '/chat/rooms/1' }] }, 'https://app.example')).toBe(
      'https://app.example/chat/rooms/1',
    );
    expect(payloadUrl({ actions: [{ url: 'https://docs.example/x' }] }, 'https://app.example')).toBe(
      'https://docs.example/x',
    );
    expect(payloadUrl({}, 'https://app.example')).toBe('https://app.example/notifications');
    expect(payloadUrl(null, 'https://app.example')).toBe('https://app.example/notifications');
  });

  it('urgency from priority; topic ≤ 32 base64url characters', () => {
    expect(urgencyOf({ priority: 'low' })).toBe('low');
    expect(urgencyOf({ priority: 'normal' })).toBe('normal');
    expect(urgencyOf({})).toBe('normal');
    expect(urgencyOf({ priority: 'high' })).toBe('high');
    expect(urgencyOf({ priority: 'urgent' })).toBe('high');
    const topic = topicOf('0F5B3C1E-7A2D-4E8F-9B6A-3C2D1E0F9A8B');
    expect(topic).toMatch(/^[A-Za-z0-9_-]{1,32}$/);
  });

  it('cuts UTF-8 without splitting characters', () => {
    expect(cutUtf8('a😀b', 4)).toBe('a');
    expect(cutUtf8('a😀b', 5)).toBe('a😀');
    expect(cutUtf8('abc', 10)).toBe('abc');
  });

  it('classifies answers and reads Retry-After', () => {
    expect(classify({ ok: true, statusCode: 201, error: null })).toBe('sent');
    expect(classify({ ok: false, statusCode: 410, error: 'x' })).toBe('gone');
    expect(classify({ ok: false, statusCode: 404, error: 'x' })).toBe('gone');
    expect(classify({ ok: false, statusCode: 429, error: 'x' })).toBe('retry');
    expect(classify({ ok: false, statusCode: 503, error: 'x' })).toBe('retry');
    expect(classify({ ok: false, statusCode: null, error: 'timeout' })).toBe('retry');
    expect(classify({ ok: false, statusCode: null, error: 'refused', refused: true })).toBe('failed');
    expect(classify({ ok: false, statusCode: 400, error: 'x' })).toBe('failed');
    expect(classify({ ok: false, statusCode: 413, error: 'x' })).toBe('failed');
    expect(classify({ ok: false, statusCode: 403, error: 'x' })).toBe('failed');
    expect(retryAfterMs('3')).toBe(3000);
    expect(retryAfterMs(undefined)).toBe(0);
    expect(retryAfterMs('soon')).toBe(0);
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs('Thu, 01 Jan 2026 00:00:10 GMT', now)).toBe(10_000);
  });
});

describe('endpoints checked again at send time (the pinned-address sender push is wired to)', () => {
  it('an endpoint whose name now resolves to a private address is refused without a request, and not retried', async () => {
    let answer = '93.184.215.14';
    const transport = pushTransport(
      { PUSH_TIMEOUT_MS: 1_000, PUSH_ALLOW_PRIVATE_ENDPOINTS: false } as Config,
      async () => [{ address: answer, family: 4 }],
    );
    const url = new URL('https://push.example/send/1');
    // At subscribe time the name was public.
    expect(await transport.checkAddress(url)).toBeNull();
    // Then it re-resolves to a private address (DNS rebinding): the send is refused before any connection.
    answer = '10.1.2.3';
    expect(await transport.checkAddress(url)).toMatch(/private|10\.1\.2\.3/);
    const send = transport.createSender();
    try {
      const result = await send({
        url: url.href,
        headers: {},
        body: Buffer.from('x'),
        contentType: 'application/octet-stream',
        userAgent: 'test',
      });
      expect(result).toMatchObject({ ok: false, statusCode: null, refused: true });
      expect(classify(result)).toBe('failed');
    } finally {
      send.close();
    }
  });
});
