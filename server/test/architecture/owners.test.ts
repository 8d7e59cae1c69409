// "A feature owns its tables" (docs/architecture.md, "Owners"), enforced for the accounts: better-auth's `user`
// table is auth's. Other parts go through auth/accounts.ts (its functions, and `accountRelations` for the joins
// of their bulk statements), so no file outside server/src/auth/ names the table in SQL or imports its Drizzle
// definition. The schema and migrations folders define the table and are exempt.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../../src', import.meta.url));

/** Where the table may be named: its owner, and the folders that define it. */
const OWNERS = ['auth', 'infra/schema', 'infra/migrations'];

/**
 * Files that still name the table, each to be moved onto auth/accounts.ts. A file listed here that no longer
 * needs it fails the test too, so the list only shrinks. Chat's rooms (split on their own branch, issue 21) join
 * `user` for member names and read the ban flag (invitations, the audience of `general`).
 */
const NOT_YET_MOVED = new Set<string>([]);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full);
    return /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts') ? [full] : [];
  });
}

/**
 * How a module names the accounts table: `"user"` inside any string or template literal (raw SQL, `sql.raw`), or
 * the Drizzle table imported from the schema (`import { user } from '…/infra/schema/…'`). Comments do not count.
 */
function namesOfUserTable(fileName: string, source: string): string[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const line = (node: ts.Node) => file.getLineAndCharacterOfPosition(node.getStart(file)).line + 1;
  const visit = (node: ts.Node) => {
    if (
      ts.isStringLiteral(node) ||
      ts.isNoSubstitutionTemplateLiteral(node) ||
      ts.isTemplateHead(node) ||
      ts.isTemplateMiddle(node) ||
      ts.isTemplateTail(node)
    ) {
      if (node.text.includes('"user"')) found.push(`line ${line(node)}: "user" in SQL text`);
    }
    if (
      ts.isImportDeclaration(node) &&
      ts.isStringLiteral(node.moduleSpecifier) &&
      /infra\/schema(\/|\.js|$)|\/schema\/(index|auth)\.js$/.test(node.moduleSpecifier.text)
    ) {
      const bindings = node.importClause?.namedBindings;
      if (bindings && ts.isNamedImports(bindings)) {
        for (const el of bindings.elements) {
          if ((el.propertyName ?? el.name).text === 'user')
            found.push(`line ${line(node)}: imports the user table`);
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

describe('architecture: auth owns the accounts table', () => {
  it('recognises the forms it must see', () => {
    const sample = [
      "import { apiKey, user } from '../infra/schema/index.js';",
      "import { user as userTable } from './infra/schema/index.js';",
      "import { session } from '../infra/schema/index.js';",
      '// a comment may say join "user" u',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a sample module
      'const a = sql`select id from "user" where id = ${x}`;',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the source text of a sample module
      'const b = sql`select 1 from t join "user" u on u.id = ${y} where true`;',
      `const c = sql.raw('delete from "user"');`,
      "const d = { role: 'user' };",
    ].join('\n');
    expect(namesOfUserTable('sample.ts', sample)).toEqual([
      'line 1: imports the user table',
      'line 2: imports the user table',
      'line 5: "user" in SQL text',
      'line 6: "user" in SQL text',
      'line 7: "user" in SQL text',
    ]);
  });

  it('no file outside auth/ names the user table (the rest use auth/accounts.ts)', () => {
    const offenders = new Map<string, string[]>();
    for (const file of sourceFiles(SRC)) {
      const rel = path.relative(SRC, file).split(path.sep).join('/');
      if (OWNERS.some((dir) => rel.startsWith(`${dir}/`))) continue;
      const names = namesOfUserTable(rel, readFileSync(file, 'utf8'));
      if (names.length > 0) offenders.set(rel, names);
    }
    const unexpected = [...offenders].filter(([rel]) => !NOT_YET_MOVED.has(rel));
    expect(unexpected).toEqual([]);
    // A file that moved onto auth/accounts.ts leaves the list.
    expect([...NOT_YET_MOVED].filter((rel) => !offenders.has(rel))).toEqual([]);
  });
});
