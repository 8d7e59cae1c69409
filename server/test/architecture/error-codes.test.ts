// Generic error codes are defined once, with their status, in http/errors.ts; a feature's map holds only the codes
// that feature adds (issue 21, "one mechanism each"). The chat socket's ChatErrorCode is the exception on purpose:
// it is the complete vocabulary of the WebSocket `error` frame (CONTRACT §6), where there is no HTTP status.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { GENERIC_ERROR_STATUS, HttpErrorCode, httpError } from '../../src/http/errors.js';
import { NotificationErrorCode, StreamErrorCode } from '../../src/notifications/errors.js';
import { PushErrorCode } from '../../src/push/errors.js';

const SRC = fileURLToPath(new URL('../../src', import.meta.url));
const generic = new Set<string>(Object.keys(GENERIC_ERROR_STATUS));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'migrations' ? [] : sourceFiles(full);
    return /\.tsx?$/.test(e.name) ? [full] : [];
  });
}

describe('error codes: generic ones once, features only their own', () => {
  it('HttpErrorCode names exactly the generic codes, and httpError takes the status from the table', () => {
    expect(Object.values(HttpErrorCode).sort()).toEqual([...generic].sort());
    for (const [code, status] of Object.entries(GENERIC_ERROR_STATUS)) {
      const err = httpError(code as HttpErrorCode, 'm');
      expect([err.statusCode, err.code]).toEqual([status, code]);
    }
  });

  it('feature maps hold no generic code', () => {
    const features = { NotificationErrorCode, PushErrorCode };
    const overlaps = Object.entries(features).flatMap(([name, map]) =>
      Object.values(map)
        .filter((v) => generic.has(v))
        .map((v) => `${name}.${v}`),
    );
    expect(overlaps).toEqual([]);
    // The stream's vocabulary is the feature's own plus generic ones, taken from HttpErrorCode.
    expect(
      Object.values(StreamErrorCode)
        .filter((v) => !generic.has(v))
        .sort(),
    ).toEqual(Object.values(NotificationErrorCode).sort());
  });

  it('no module outside http/errors.ts pairs a generic code with a status of its own', () => {
    const pattern = new RegExp(`new AppError\\(\\s*\\d{3},\\s*'(${[...generic].join('|')})'`);
    const offenders = sourceFiles(SRC)
      .filter((f) => !f.endsWith(path.join('http', 'errors.ts')) && pattern.test(readFileSync(f, 'utf8')))
      .map((f) => path.relative(SRC, f));
    expect(offenders).toEqual([]);
  });
});
