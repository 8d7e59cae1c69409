// The size rule of docs/architecture.md ("Rules"), enforced: a top-level function of server/src (a factory such as
// `createChatService`, or any other) is at most MAX_LINES long, counted from its `function` line to its closing
// brace. Past that, a factory holds several jobs and is split at its seams (issue 21). Measured on the syntax tree
// (the TypeScript compiler API), so strings, comments and nested functions cannot fool the count.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../../src', import.meta.url));
const MAX_LINES = 300;

interface Measured {
  /** `<file>#<function>` */
  id: string;
  lines: number;
}

/** The function a top-level statement defines, with its name: a declaration or `const x = (…) => {…}`. */
function topLevelFunctions(statement: ts.Statement): Array<{ name: string; node: ts.Node }> {
  if (ts.isFunctionDeclaration(statement)) {
    return statement.body ? [{ name: statement.name?.text ?? 'default', node: statement }] : [];
  }
  if (!ts.isVariableStatement(statement)) return [];
  return statement.declarationList.declarations.flatMap((d) => {
    let init = d.initializer;
    while (
      init &&
      (ts.isParenthesizedExpression(init) || ts.isAsExpression(init) || ts.isSatisfiesExpression(init))
    )
      init = init.expression;
    return init && (ts.isArrowFunction(init) || ts.isFunctionExpression(init))
      ? [{ name: d.name.getText(), node: init }]
      : [];
  });
}

/** Lines of every top-level function of one source text. */
function measure(file: string, text: string): Measured[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const lineOf = (pos: number) => source.getLineAndCharacterOfPosition(pos).line;
  return source.statements.flatMap((s) =>
    topLevelFunctions(s).map(({ name, node }) => ({
      id: `${file}#${name}`,
      // getStart skips the leading comments: a long doc comment does not count, the signature line does.
      lines: lineOf(node.getEnd()) - lineOf(node.getStart(source)) + 1,
    })),
  );
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'migrations' ? [] : sourceFiles(full);
    return /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts') ? [full] : [];
  });
}

const measured = sourceFiles(SRC).flatMap((f) =>
  measure(path.relative(SRC, f).split(path.sep).join('/'), readFileSync(f, 'utf8')),
);

describe('architecture: factories stay small', () => {
  it('measures a top-level function from its first line to its closing brace, nested functions inside it', () => {
    const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const text = [
      '/** A doc comment',
      ' * of three lines. */',
      'export function createThing(): () => void {', // its first line
      body(4),
      '  const inner = () => {',
      body(2),
      '  };',
      '  return inner;',
      '}', // its 11th
      'export const arrow = async (x: number) => {',
      body(3),
      '};',
      'const wrapped = ((y: string) => y) as (y: string) => string;',
      'class Box { method() { return 1; } }',
      'declare function ambient(): void;',
      'const notAFunction = { a: 1 };',
    ].join('\n');
    expect(measure('x.ts', text)).toEqual([
      { id: 'x.ts#createThing', lines: 11 },
      { id: 'x.ts#arrow', lines: 5 },
      { id: 'x.ts#wrapped', lines: 1 },
    ]);
  });

  it(`every top-level function in server/src is at most ${MAX_LINES} lines`, () => {
    expect(measured.length).toBeGreaterThan(100);
    const over = measured.filter((m) => m.lines > MAX_LINES).map((m) => `${m.id}: ${m.lines} lines`);
    expect(over).toEqual([]);
  });
});
