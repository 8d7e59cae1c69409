// "A feature owns its tables" (docs/architecture.md, "Owners"), enforced: every table the Drizzle schema defines
// has one owner (a folder, or a single file for a table that is one module's), and no file outside it names the
// table in SQL or imports its Drizzle definition. Other parts call the owner's functions, or join the relations
// it exports for their bulk statements (auth/accounts.ts's accountRelations, notifications/relations.ts's
// notificationRelations and digestContent). The schema and migrations folders define the tables and are exempt.
//
// Every table has an owner: better-auth's tables are auth's; the notification tables notifications'; the email
// outbox and its shared bodies are infra/email-outbox.ts's (a shared queue every feature enqueues into through its functions); the
// digests email's; push, webhooks, API keys, chat and admin's broadcast sends their folders'; the idempotency
// keys http/idempotency.ts's. None is left out. Each owner's housekeeping task deletes only from its own tables,
// which this test checks too (a `delete from` names the table).
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../../src', import.meta.url));
const SCHEMA = path.join(SRC, 'infra/schema');

/** Each table's owner: a folder or a file under server/src, the only place that may name the table. */
const OWNERS: Record<string, string> = {
  user: 'auth',
  session: 'auth',
  account: 'auth',
  verification: 'auth',
  auth_store_repair: 'auth',
  notification: 'notifications',
  notification_cursor: 'notifications',
  notification_event: 'notifications',
  notification_preference: 'notifications',
  email_outbox: 'infra/email-outbox.ts',
  email_body: 'infra/email-outbox.ts',
  email_digest: 'email',
  push_subscription: 'push',
  push_delivery: 'push',
  webhook_endpoint: 'webhooks',
  webhook_delivery: 'webhooks',
  api_key: 'api-keys',
  chat_room: 'chat',
  chat_member: 'chat',
  chat_message: 'chat',
  chat_room_event: 'chat',
  broadcast_send: 'admin',
  idempotency_key: 'http/idempotency.ts',
};

/** Where any table may be named: the folders that define them. */
const DEFINERS = ['infra/schema', 'infra/migrations'];

/**
 * `file: table` pairs still to be moved onto the owner's functions. An entry that no longer applies fails the
 * test too, so the list only shrinks; it is empty.
 */
const NOT_YET_MOVED = new Set<string>([]);

const within = (rel: string, owner: string) => rel === owner || rel.startsWith(`${owner}/`);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full);
    return /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** The schema's tables by Drizzle export name: `export const chatRoom = pgTable('chat_room', …)`. */
function schemaTables(): Map<string, string> {
  const tables = new Map<string, string>();
  for (const file of sourceFiles(SCHEMA)) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    for (const statement of source.statements) {
      if (!ts.isVariableStatement(statement)) continue;
      for (const decl of statement.declarationList.declarations) {
        const init = decl.initializer;
        if (
          ts.isIdentifier(decl.name) &&
          init &&
          ts.isCallExpression(init) &&
          ts.isIdentifier(init.expression) &&
          init.expression.text === 'pgTable' &&
          init.arguments[0] &&
          ts.isStringLiteral(init.arguments[0])
        )
          tables.set(decl.name.text, init.arguments[0].text);
      }
    }
  }
  return tables;
}

const TABLES = schemaTables();

/**
 * SQL that names table `t`: the table after a keyword that takes one (`from`, `join`, `into`, `update`, `using`,
 * `table`, `references`, `truncate`), bare or quoted, optionally `public.`-qualified, and not followed by more of
 * an identifier (so `from notification_preference` is not `notification`, and `notifications` is neither). Route
 * paths (`'/notification/list'`) and prose have no such keyword before the name. `"user"` counts anywhere: it is a
 * reserved word, so SQL can only name that table quoted. Not seen: a table after a comma in a FROM list (the code
 * writes joins).
 */
const namesInSql = new Map(
  [...TABLES.values()].map((t) => [
    t,
    new RegExp(
      `\\b(from|join|into|update|using|table|references|truncate)\\s+(only\\s+)?("?public"?\\.)?("${t}"|${t}(?![\\w$"]))` +
        (t === 'user' ? '|"user"' : ''),
      'i',
    ),
  ]),
);

/**
 * The tables a module names, as `table: how (line n)`: in any string or template literal (raw SQL, `sql.raw`),
 * or by importing (or re-exporting) a Drizzle table from infra/schema, or through a namespace import of the
 * schema (`schema.notification`). Comments do not count. `rel` is the module's path under server/src, which
 * resolves its imports.
 */
function tablesNamedBy(rel: string, source: string): string[] {
  const file = ts.createSourceFile(rel, source, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const line = (node: ts.Node) => file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1;
  const fromSchema = (spec: ts.Expression | undefined) => {
    if (spec === undefined || !ts.isStringLiteral(spec) || !spec.text.startsWith('.')) return false;
    const there = path.relative(SCHEMA, path.resolve(SRC, path.dirname(rel), spec.text));
    return !there.startsWith('..') && !path.isAbsolute(there);
  };
  const namespaces = new Set<string>();
  const drizzle = (name: ts.Identifier | ts.StringLiteral, node: ts.Node, how: string) => {
    const table = TABLES.get(name.text);
    if (table) found.push(`${table}: ${how} (line ${line(node)})`);
  };
  const visit = (node: ts.Node) => {
    if (
      ts.isStringLiteral(node) ||
      ts.isNoSubstitutionTemplateLiteral(node) ||
      ts.isTemplateHead(node) ||
      ts.isTemplateMiddle(node) ||
      ts.isTemplateTail(node)
    ) {
      for (const [table, re] of namesInSql) {
        if (re.test(node.text)) found.push(`${table}: SQL text (line ${line(node)})`);
      }
    }
    if (ts.isImportDeclaration(node) && fromSchema(node.moduleSpecifier)) {
      const bindings = node.importClause?.namedBindings;
      if (bindings && ts.isNamedImports(bindings)) {
        for (const el of bindings.elements)
          drizzle(el.propertyName ?? el.name, node, 'imports its Drizzle table');
      }
      if (bindings && ts.isNamespaceImport(bindings)) namespaces.add(bindings.name.text);
    }
    if (ts.isExportDeclaration(node) && fromSchema(node.moduleSpecifier)) {
      const clause = node.exportClause;
      if (clause && ts.isNamedExports(clause)) {
        for (const el of clause.elements)
          drizzle(el.propertyName ?? el.name, node, 're-exports its Drizzle table');
      }
    }
    if (
      ts.isPropertyAccessExpression(node) &&
      ts.isIdentifier(node.expression) &&
      namespaces.has(node.expression.text) &&
      ts.isIdentifier(node.name)
    )
      drizzle(node.name, node, 'reads its Drizzle table off the schema');
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

describe('architecture: every table has one owner', () => {
  it('every table the schema defines has an owner, and the map names no other table', () => {
    const defined = [...TABLES.values()].sort();
    expect(defined.length).toBeGreaterThan(0);
    // Plain identifiers, so namesInSql can put them into its patterns as they are.
    expect(defined.filter((t) => !/^[a-z_]+$/.test(t))).toEqual([]);
    expect(Object.keys(OWNERS).sort()).toEqual(defined);
    for (const owner of new Set(Object.values(OWNERS))) {
      const exists = sourceFiles(SRC).some((f) =>
        within(path.relative(SRC, f).split(path.sep).join('/'), owner),
      );
      expect(exists, `owner ${owner} is a file or folder of server/src`).toBe(true);
    }
  });

  it('recognises the forms it must see', () => {
    const sample = [
      "import { apiKey, user } from '../infra/schema/index.js';",
      "import { user as userTable } from '../infra/schema/index.js';",
      "import { session } from '../infra/schema/index.js';",
      '// a comment may say join "user" u, or from notification n',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a sample module
      'const a = sql`select id from "user" where id = ${x}`;',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a sample module
      'const b = sql`select 1 from t join "user" u on u.id = ${y} where true`;',
      `const c = sql.raw('delete from "user"');`,
      "const d = { role: 'user' };",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a sample module
      'const e = sql`select n.title from x left join notification n on n.id = ${z}`;',
      'const f = sql`select 1 from notification_preference p where p.push_enabled`;',
      "const g = sql.raw('delete from notification where true');",
      'const h = sql`insert into notification_event (user_id) values (1)`;',
      'const i = sql`update notification_cursor set unread = 0`;',
      "const j = { url: '/notification/list', text: 'a notification from chat', route: '/notifications' };",
      "const k = 'delete from notifications_view; select * from notification_preferences';",
      "import { notificationPreference as prefs } from '../infra/schema/notifications.js';",
      "import * as schema from '../infra/schema/index.js';",
      'const l = schema.emailOutbox;',
      "export { pushDelivery } from '../infra/schema/index.js';",
      "import { notification } from './schema.js';",
      'const m = sql`select 1 from public.push_subscription s join "email_digest" d on true`;',
    ].join('\n');
    expect(tablesNamedBy('push/sample.ts', sample)).toEqual([
      'api_key: imports its Drizzle table (line 1)',
      'user: imports its Drizzle table (line 1)',
      'user: imports its Drizzle table (line 2)',
      'session: imports its Drizzle table (line 3)',
      'user: SQL text (line 5)',
      'user: SQL text (line 6)',
      'user: SQL text (line 7)',
      'notification: SQL text (line 9)',
      'notification_preference: SQL text (line 10)',
      'notification: SQL text (line 11)',
      'notification_event: SQL text (line 12)',
      'notification_cursor: SQL text (line 13)',
      'notification_preference: imports its Drizzle table (line 16)',
      'email_outbox: reads its Drizzle table off the schema (line 18)',
      'push_delivery: re-exports its Drizzle table (line 19)',
      'email_digest: SQL text (line 21)',
      'push_subscription: SQL text (line 21)',
    ]);
  });

  it('no file outside a table’s owner names it (the rest call the owner’s functions and relations)', () => {
    const offenders = new Set<string>();
    const details: string[] = [];
    for (const file of sourceFiles(SRC)) {
      const rel = path.relative(SRC, file).split(path.sep).join('/');
      if (DEFINERS.some((dir) => within(rel, dir))) continue;
      for (const named of tablesNamedBy(rel, readFileSync(file, 'utf8'))) {
        const table = named.slice(0, named.indexOf(':'));
        const owner = OWNERS[table];
        if (owner === undefined || within(rel, owner)) continue;
        offenders.add(`${rel}: ${table}`);
        if (!NOT_YET_MOVED.has(`${rel}: ${table}`)) details.push(`${rel} names ${named} (owner: ${owner})`);
      }
    }
    expect(details).toEqual([]);
    // A file that moved onto the owner's functions leaves the list.
    expect([...NOT_YET_MOVED].filter((entry) => !offenders.has(entry))).toEqual([]);
  });
});
