// One page of a user's notification list (the contract's `page`, `limit`, `filter`, `type`, `search`) and the total it
// is out of, on the notification table's indexes. A page's own statement (page and count in one) or, for pages
// asked for at the same time, one statement for many (page-batch.ts; docs/design/notifications.md "List").
import { type SQL, sql } from 'drizzle-orm';
import { type Db, textArray } from '../infra/db.js';
import { preparedRows } from '../infra/prepared-statements.js';
import { createPageBatcher, type PageKey, type PageResult } from './page-batch.js';
import {
  NOTIFICATION_COLUMNS,
  type NotificationRow,
  type StoredNotification,
  toNotification,
} from './rows.js';
import type { ListQuery } from './schemas.js';

type Executor = Pick<Db, 'execute'>;

/** From this offset on, a list page reads its ids from the index first (page 50 of 1,000 rows: 1.17 → 0.51 ms of server CPU). */
const DEFERRED_ROWS_FROM_OFFSET = 100;
const DEFAULT_LIST_STATEMENTS_IN_FLIGHT = 4;
/** Distinct pages per shared statement at most. */
const LIST_BATCH_MAX = 64;

const filterConditions = (filter: ListQuery['filter']): SQL[] =>
  filter === 'read' ? [sql`read = true`] : filter === 'unread' ? [sql`read = false`] : [];
/** What pages must share to share a statement: its text. */
interface Shape {
  filter: ListQuery['filter'];
  typed: boolean;
  /** From DEFERRED_ROWS_FROM_OFFSET on: ids from the index first. */
  deep: boolean;
  /** False when the caller knows the total already (the read cache's, unread-cache.ts): rows only. */
  counted: boolean;
}
const shapeKey = (s: Shape) =>
  `${s.filter}:${s.typed ? 'typed' : 'all'}:${s.deep ? 'deep' : 'near'}:${s.counted ? 'count' : 'rows'}`;
const parseShape = (key: string): Shape => {
  const [filter, typed, deep, counted] = key.split(':');
  return {
    filter: filter as ListQuery['filter'],
    typed: typed === 'typed',
    deep: deep === 'deep',
    counted: counted === 'count',
  };
};
/** int[] parameter in the same literal form as textArray (node-postgres and PGlite alike). */
const intArray = (values: number[]): SQL => sql`${`{${values.join(',')}}`}::int[]`;

/** `%`, `_` and the escape character itself match literally inside the ILIKE pattern. */
function likePattern(term: string): string {
  return `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * A page's rows. Deep pages pick their ids from the index alone and then read only the page's rows: an ordinary
 * scan would read every skipped row from the table (page 50 of 1,000 rows: 1,000 heap reads for 20 rows).
 */
const pageRowsOf = (cond: SQL, order: SQL, deep: boolean): SQL =>
  deep
    ? sql`select ${NOTIFICATION_COLUMNS} from notification where id in (select id from notification where ${cond} ${order})`
    : sql`select ${NOTIFICATION_COLUMNS} from notification where ${cond} ${order}`;

export interface ListPagesOptions {
  /** List statements of one executor running at a time before pages queue (page-batch.ts); default 4. */
  listStatementsInFlight?: number;
  /** Distinct pages one statement may carry; default 64. 0: no queue, every page its own statement at once (as
   * before page-batch.ts; bench/list-statements.ts compares the two). */
  listBatchMax?: number;
}

export function createListPages(db: Db, options: ListPagesOptions = {}) {
  /** A page's own statement: page and count in one (one pool connection, one round trip). */
  const onePage = async (
    via: Executor,
    { filter, counted }: Pick<Shape, 'filter' | 'counted'>,
    key: { userId: string; type?: string | null; offset: number; limit: number },
    search?: string,
  ): Promise<PageResult<StoredNotification>> => {
    const where: SQL[] = [sql`user_id = ${key.userId}`, ...filterConditions(filter)];
    if (key.type) where.push(sql`type = ${key.type}`);
    if (search) {
      const pattern = likePattern(search);
      where.push(sql`(title ilike ${pattern} escape '\\' or content ilike ${pattern} escape '\\')`);
    }
    // Raw SQL: ILIKE … ESCAPE and the seq-free column list have no builder form.
    const cond = sql.join(where, sql` and `);
    const order = sql`order by created_at desc, id desc limit ${key.limit} offset ${key.offset}`;
    const pageRows = pageRowsOf(cond, order, key.offset >= DEFERRED_ROWS_FROM_OFFSET);
    if (!counted) {
      const rows = await preparedRows<NotificationRow>(
        via,
        sql`select p.* from (${pageRows}) p order by p.created_at desc, p.id desc`,
      );
      return { rows: rows.map(toNotification), totalCount: 0 };
    }
    // Page and count in ONE statement (under load a second round trip and pool checkout cost more than the
    // count itself). Both parts use the (user_id, created_at desc, id desc) indexes (the partial one for unread);
    // the count reads only the user's matching index entries. The count row is always there, so a page past the
    // end still reports the total (its page columns are null). A named statement: planning it cost more than
    // running it (infra/prepared-statements.ts).
    const rows = await preparedRows<Partial<NotificationRow> & { total: number }>(
      via,
      sql`select c.total, p.* from (select count(*)::int as total from notification where ${cond}) c
          left join lateral (${pageRows}) p on true
          order by p.created_at desc, p.id desc`,
    );
    const page = rows.filter((r): r is NotificationRow & { total: number } => r.id != null);
    return { rows: page.map(toNotification), totalCount: Number(rows[0]?.total ?? 0) };
  };

  /**
   * Several users' pages of one shape in one statement: the same two parts as onePage's, laterally per page (deep
   * pages in the same deferred form). `ord` numbers the pages as asked; a page with no rows still has its count row.
   */
  const manyPages = async (
    via: Executor,
    { filter, typed, deep, counted }: Shape,
    keys: PageKey[],
  ): Promise<PageResult<StoredNotification>[]> => {
    const where: SQL[] = [sql`user_id = b.uid`, ...filterConditions(filter)];
    if (typed) where.push(sql`type = b.typ`);
    const cond = sql.join(where, sql` and `);
    const pageRows = pageRowsOf(cond, sql`order by created_at desc, id desc limit b.lim offset b.off`, deep);
    const pagesOf = sql`unnest(${textArray(keys.map((k) => k.userId))}, ${intArray(keys.map((k) => k.offset))},
                      ${intArray(keys.map((k) => k.limit))}, ${textArray(keys.map((k) => k.type ?? ''))})
               with ordinality as b(uid, off, lim, typ, ord)`;
    // Rows only (the totals are known): a page with no rows has no row here, its result stays empty.
    const rows = await preparedRows<Partial<NotificationRow> & { ord: number; total?: number }>(
      via,
      counted
        ? sql`select b.ord::int as ord, c.total, p.*
          from ${pagesOf}
          cross join lateral (select count(*)::int as total from notification where ${cond}) c
          left join lateral (${pageRows}) p on true
          order by b.ord, p.created_at desc, p.id desc`
        : sql`select b.ord::int as ord, p.*
          from ${pagesOf}
          cross join lateral (${pageRows}) p
          order by b.ord, p.created_at desc, p.id desc`,
    );
    const results = keys.map((): PageResult<StoredNotification> => ({ rows: [], totalCount: 0 }));
    for (const r of rows) {
      const result = results[Number(r.ord) - 1];
      if (!result) continue;
      result.totalCount = Number(r.total ?? 0);
      if (r.id != null) result.rows.push(toNotification(r as NotificationRow));
    }
    return results;
  };

  const pages = createPageBatcher<Executor, StoredNotification>({
    maxInFlight: options.listStatementsInFlight ?? DEFAULT_LIST_STATEMENTS_IN_FLIGHT,
    maxBatch: options.listBatchMax ?? LIST_BATCH_MAX,
    one: (via, shape, key) => onePage(via, parseShape(shape), key),
    many: (via, shape, keys) => manyPages(via, parseShape(shape), keys),
  });

  return {
    /**
     * One page of the user's list and the total it is out of. `via`: where to read (a replica chosen by the read
     * router, docs/architecture.md "Read replicas"). `knownTotal`: the total when the caller holds it (the read
     * cache's): the statement then reads the page's rows only. Pages without a search share statements with the
     * pages of the same shape requested at the same time (page-batch.ts).
     */
    async list(
      userId: string,
      q: ListQuery,
      via: Executor = db,
      knownTotal: number | null = null,
    ): Promise<{ rows: StoredNotification[]; totalCount: number }> {
      const offset = (q.page - 1) * q.limit;
      const counted = knownTotal === null;
      const key = { userId, type: q.type ?? null, offset, limit: q.limit };
      const result =
        q.search || options.listBatchMax === 0
          ? await onePage(via, { filter: q.filter, counted }, key, q.search)
          : await pages.page(
              via,
              shapeKey({
                filter: q.filter,
                typed: Boolean(q.type),
                deep: offset >= DEFERRED_ROWS_FROM_OFFSET,
                counted,
              }),
              key,
            );
      return counted ? result : { rows: result.rows, totalCount: knownTotal };
    },
  };
}
