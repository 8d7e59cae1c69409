// Scratch experiment (not committed): list page 2 per request vs batched over unnest … lateral.
import pg from 'pg';
import { cpuSecondsOfProcesses } from './_lib.js';
import { seedAtScale } from './_seed.js';
import { startHerald, startStack } from './_server.js';

const COLS = `id, user_id, type, title, content, read, metadata, created_at, updated_at`;
const single = `select c.total, p.* from (select count(*)::int as total from notification where user_id = $1) c
  left join lateral (select ${COLS} from notification where user_id = $1 order by created_at desc, id desc limit $2 offset $3) p on true
  order by p.created_at desc, p.id desc`;
const batched = `select b.ord, c.total, p.* from unnest($1::text[]) with ordinality b(uid, ord)
  cross join lateral (select count(*)::int as total from notification where user_id = b.uid) c
  left join lateral (select ${COLS} from notification where user_id = b.uid order by created_at desc, id desc limit $2 offset $3) p on true
  order by b.ord, p.created_at desc, p.id desc`;

async function run(mode: 'single' | 'batch', pool: pg.Pool, users: string[], seconds: number, sameUser: boolean) {
  let done = 0;
  const end = Date.now() + seconds * 1000;
  const queue: Array<{ uid: string; resolve: () => void }> = [];
  let inFlight = 0;
  const MAXB = 2;
  const flush = () => {
    while (inFlight < MAXB && queue.length > 0) {
      const batch = queue.splice(0, 50);
      const uniq = [...new Set(batch.map((b) => b.uid))];
      inFlight++;
      pool.query({ name: 'b', text: batched, values: [uniq, 20, 20] }).then((r) => {
        inFlight--;
        if (r.rows.length < uniq.length) throw new Error('short');
        for (const b of batch) b.resolve();
        flush();
      });
    }
  };
  const c0 = process.cpuUsage();
  const p0 = cpuSecondsOfProcesses('postgres');
  const t0 = Date.now();
  let sizes = 0, batches = 0;
  await Promise.all(
    Array.from({ length: 100 }, async (_, i) => {
      const uid = sameUser ? users[0]! : users[i % users.length]!;
      while (Date.now() < end) {
        if (mode === 'single') {
          await pool.query({ name: 's', text: single, values: [uid, 20, 20] });
        } else {
          await new Promise<void>((resolve) => {
            queue.push({ uid, resolve });
            if (queue.length === 1) setImmediate(flush);
          });
        }
        done++;
      }
    }),
  );
  const secs = (Date.now() - t0) / 1000;
  const cpu = process.cpuUsage(c0);
  const node = (cpu.user + cpu.system) / done;
  const pgus = ((cpuSecondsOfProcesses('postgres') - p0) * 1e6) / done;
  void sizes; void batches;
  console.log(`${mode}${sameUser ? ' same-user' : ' 100 users'}: ${Math.round(done / secs)} q/s, node ${node.toFixed(0)} µs/q, pg ${pgus.toFixed(0)} µs/q`);
}

async function main() {
  const stack = await startStack();
  try {
    const h = await startHerald(stack, {});
    await h.stop();
    const c = new pg.Client({ connectionString: stack.db.url });
    await c.connect();
    await c.query(`insert into "user" (id, name, email, email_verified) values ('me','me','me@x.test',true)`);
    await c.end();
    await seedAtScale(stack.db.url, 'me', { rows: 500_000, users: 5_000 });
    console.log('seeded');
    const pool = new pg.Pool({ connectionString: stack.db.url, max: 10 });
    pool.on('error', () => {});
    const users = Array.from({ length: 100 }, (_, i) => `b${i * 37 + 1}`);
    for (let r = 0; r < 2; r++) {
      for (const same of [false, true]) {
        await run('single', pool, users, 6, same);
        await run('batch', pool, users, 6, same);
      }
    }
    await pool.end();
  } catch (e) { console.error('ERR', e); } finally {
    await stack.close();
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
