// rows.ts turns PostgreSQL's timestamptz text into the API's ISO strings without a Date on the common path (a UTC
// session): the result must be exactly what Date gives, for every fraction length, and Date must still answer
// for anything else.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { iso } from '../../src/notifications/rows.js';
import { TEST_PG_URL } from '../helpers/env.js';

const viaDate = (text: string) => new Date(text).toISOString();

describe('iso(timestamptz text)', () => {
  it('equals Date for generated UTC timestamps with 0 to 6 fraction digits', () => {
    let seed = 42;
    const next = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const two = (n: number) => String(n).padStart(2, '0');
    for (let i = 0; i < 5_000; i++) {
      const digits = next(7);
      const fraction = digits === 0 ? '' : `.${String(next(10 ** digits)).padStart(digits, '0')}`;
      const text = `${1970 + next(130)}-${two(1 + next(12))}-${two(1 + next(28))} ${two(next(24))}:${two(next(60))}:${two(next(60))}${fraction}+00`;
      expect(iso(text), text).toBe(viaDate(text));
    }
  });

  it('leaves other offsets, odd years and Date objects to Date', () => {
    for (const text of [
      '2026-11-27 09:01:00.123456+01',
      '2026-11-27 09:01:00.123456+05:30',
      '2026-11-27 09:01:00.123456-08',
      '0099-01-01 00:00:00+00',
    ]) {
      expect(iso(text), text).toBe(viaDate(text));
    }
    const d = new Date('2026-11-27T09:01:00.123Z');
    expect(iso(d)).toBe('2026-11-27T09:01:00.123Z');
  });

  describe('on what PostgreSQL really prints', () => {
    let client: pg.Client;
    beforeAll(async () => {
      client = new pg.Client({ connectionString: TEST_PG_URL });
      await client.connect();
    });
    afterAll(async () => {
      await client?.end();
    });

    it('equals Date for a spread of instants, in a UTC session and in another time zone', async () => {
      for (const zone of ['UTC', 'Europe/Paris']) {
        await client.query(`set time zone '${zone}'`);
        const { rows } = await client.query<{ t: string }>(
          `select (timestamptz '2026-01-01 00:00:00+00' + g * interval '1 day 1 hour 1 minute 1.001001 second'
                   + (g % 7) * interval '0.000001 second')::text as t
             from generate_series(0, 400) g`,
        );
        for (const { t } of rows) expect(iso(t), t).toBe(viaDate(t));
      }
    });
  });
});
