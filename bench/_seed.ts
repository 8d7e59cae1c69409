// Production-like notification tables for the benchmarks that read them (issue 27: every benchmark runs on
// hundreds of thousands of rows spread over many users, not on one user's rows alone).
import pg from 'pg';

export interface ScaleSeed {
  /** Total notification rows written (the measured user's included). */
  rows: number;
  /** Other users the rows are spread over. */
  users: number;
}

/**
 * `users` other users ('b1'…) and `rows` notifications interleaved over all of them, as real traffic writes
 * them; each measured user (`me`, one or several) gets 1,000 of their own among them (the retention bound per
 * user). Ends with VACUUM ANALYZE, the state autovacuum keeps a steady table in.
 */
export async function seedAtScale(
  url: string,
  me: string | string[],
  { rows, users }: ScaleSeed,
): Promise<void> {
  const measured = typeof me === 'string' ? [me] : me;
  const step = Math.floor(rows / (1000 * measured.length));
  if (step < 2)
    throw new Error(`${rows} rows cannot hold 1,000 for each of ${measured.length} measured users`);
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(
      `insert into "user" (id, name, email, email_verified) select 'b' || g, 'b' || g, 'b' || g || '@example.test', true
       from generate_series(1, ${users}) g`,
    );
    await c.query(
      `insert into notification (user_id, type, title, content, read, created_at, updated_at)
       select case when g % ${step} = 0 then ($1::text[])[1 + (g / ${step}) % ${measured.length}]
                   else 'b' || (1 + g % ${users}) end,
              (array['info','success','warning','error','system'])[1 + g % 5],
              'Notification ' || g, 'Body of notification ' || g || ': ' || md5(g::text), g % 3 = 0,
              now() - g * interval '1 second', now() - g * interval '1 second'
       from generate_series(1, ${rows}) g`,
      [measured],
    );
    await c.query('vacuum analyze notification');
  } finally {
    await c.end();
  }
}
