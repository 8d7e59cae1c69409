// Generates client/src/contract.ts from the server's wire types (server/src/contract.ts, derived from the Zod schemas
// that validate the routes): every exported type is expanded into a plain declaration with the TypeScript checker,
// so the published SDK's declarations import nothing unpublished (no @herald/server, no zod) and stay real types.
// The members of `ContractValues` become constants. The server's schemas stay the one source of truth:
// `npm run gen:contract -w client` rewrites the file, `npm run build` runs it first, and test/contract.test.ts fails
// when the committed file differs from what this script generates.
//
//   node scripts/gen-contract.mjs           write src/contract.ts
//   node scripts/gen-contract.mjs --check   exit 1 when src/contract.ts is stale
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const SERVER_CONTRACT = fileURLToPath(new URL('../../server/src/contract.ts', import.meta.url));
const SERVER_TSCONFIG = fileURLToPath(new URL('../../server/tsconfig.json', import.meta.url));
export const OUTPUT = fileURLToPath(new URL('../src/contract.ts', import.meta.url));
const VALUES = 'ContractValues';

/** The generated module's text. */
export function generateContract() {
  const configFile = ts.readConfigFile(SERVER_TSCONFIG, ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(
    configFile.config,
    ts.sys,
    fileURLToPath(new URL('../../server/', import.meta.url)),
  );
  const program = ts.createProgram([SERVER_CONTRACT], { ...parsed.options, noEmit: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(SERVER_CONTRACT);
  if (!source) throw new Error(`cannot read ${SERVER_CONTRACT}`);
  const moduleSymbol = checker.getSymbolAtLocation(source);
  if (!moduleSymbol) throw new Error('server/src/contract.ts has no exports');

  const exports = checker
    .getExportsOfModule(moduleSymbol)
    .map((s) => (s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s))
    .map((s, i, all) => ({ name: checker.getExportsOfModule(moduleSymbol)[i].name, symbol: s, all }));

  // Named types first, so nested occurrences print as a reference to the name instead of being expanded.
  const named = new Map();
  const typeOf = (symbol) => checker.getDeclaredTypeOfSymbol(symbol);
  const typeExports = exports.filter(
    ({ name, symbol }) => name !== VALUES && symbol.flags & ts.SymbolFlags.Type,
  );
  for (const { name, symbol } of typeExports) {
    const t = typeOf(symbol);
    // Only structured types are worth a reference; a literal union (e.g. `NotificationType`) is too.
    if (!named.has(t)) named.set(t, name);
  }

  const docOf = (symbol) => {
    const text = ts.displayPartsToString(symbol.getDocumentationComment(checker)).trim();
    return text ? text : '';
  };
  const jsdoc = (text, indent) =>
    text
      ? text.includes('\n')
        ? `${indent}/**\n${text
            .split('\n')
            .map((l) => `${indent} * ${l}`.trimEnd())
            .join('\n')}\n${indent} */\n`
        : `${indent}/** ${text} */\n`
      : '';

  const isOptionalSymbol = (s) => (s.flags & ts.SymbolFlags.Optional) !== 0;
  const propKey = (name) => (/^[A-Za-z_$][\w$]*$/.test(name) ? name : JSON.stringify(name));

  /** TypeScript source for `type`; `self` is the exported name being printed (never printed as a reference). */
  const print = (type, indent, self, dropUndefined = false) => {
    const name = named.get(type);
    if (name && name !== self) return name;
    const f = type.flags;
    if (f & ts.TypeFlags.Any)
      throw new Error(`${self}: the server's type contains \`any\`, which the SDK must not ship`);
    if (f & ts.TypeFlags.Unknown) return 'unknown';
    if (f & ts.TypeFlags.String) return 'string';
    if (f & ts.TypeFlags.Number) return 'number';
    if (f & ts.TypeFlags.Boolean) return 'boolean';
    if (f & ts.TypeFlags.BigInt) return 'bigint';
    if (f & ts.TypeFlags.Null) return 'null';
    if (f & ts.TypeFlags.Undefined) return 'undefined';
    if (f & ts.TypeFlags.Void) return 'void';
    if (f & ts.TypeFlags.Never) return 'never';
    if (f & ts.TypeFlags.StringLiteral) return JSON.stringify(type.value);
    if (f & ts.TypeFlags.NumberLiteral) return String(type.value);
    if (f & ts.TypeFlags.BooleanLiteral) return checker.typeToString(type);
    if (type.isUnion()) {
      let parts = dropUndefined ? type.types.filter((t) => !(t.flags & ts.TypeFlags.Undefined)) : type.types;
      if (parts.length === 1) return print(parts[0], indent, self);
      // `boolean` is `true | false` inside a union.
      const hasTrue = parts.some(
        (t) => t.flags & ts.TypeFlags.BooleanLiteral && checker.typeToString(t) === 'true',
      );
      const hasFalse = parts.some(
        (t) => t.flags & ts.TypeFlags.BooleanLiteral && checker.typeToString(t) === 'false',
      );
      const out = [];
      if (hasTrue && hasFalse) {
        parts = parts.filter((t) => !(t.flags & ts.TypeFlags.BooleanLiteral));
        out.push('boolean');
      }
      for (const t of parts) {
        const p = print(t, indent, self);
        out.push(t.isIntersection() || (t.flags & ts.TypeFlags.Object && p.startsWith('(')) ? `(${p})` : p);
      }
      // Literal unions read better in order; object unions keep theirs (the discriminant order of the server).
      return out.join(' | ');
    }
    // zod's inferred objects are often `A & B`: print them as the one object they are.
    if (type.isIntersection() && type.types.every((t) => t.flags & ts.TypeFlags.Object)) {
      return printObject(type, indent, self);
    }
    if (f & ts.TypeFlags.Object) {
      if (checker.isArrayType(type)) {
        const [el] = checker.getTypeArguments(type);
        const p = print(el, indent, self);
        const ro = type.symbol?.name === 'ReadonlyArray';
        const wrapped = /[|&]/.test(p) && !p.startsWith('{') ? `(${p})` : p;
        return `${ro ? 'readonly ' : ''}${wrapped}[]`;
      }
      if (checker.isTupleType(type)) {
        const els = checker.getTypeArguments(type).map((t) => print(t, indent, self));
        const ro = type.target?.readonly;
        return `${ro ? 'readonly ' : ''}[${els.join(', ')}]`;
      }
      if (type.symbol?.name === 'Date') return 'Date';
      return printObject(type, indent, self);
    }
    throw new Error(`${self}: cannot print type ${checker.typeToString(type)} (flags ${f})`);
  };

  const printObject = (type, indent, self) => {
    const inner = `${indent}  `;
    const lines = [];
    for (const info of checker.getIndexInfosOfType(type)) {
      lines.push(`${inner}[key: ${print(info.keyType, inner, self)}]: ${print(info.type, inner, self)};`);
    }
    const calls = checker.getSignaturesOfType(type, ts.SignatureKind.Call);
    if (calls.length > 0) throw new Error(`${self}: functions are not wire types`);
    for (const prop of checker.getPropertiesOfType(type)) {
      const decl = prop.valueDeclaration ?? prop.declarations?.[0];
      const propType = checker.getTypeOfSymbol(prop);
      const optional = isOptionalSymbol(prop);
      const readonly =
        decl && ts.getCombinedModifierFlags(decl) & ts.ModifierFlags.Readonly ? 'readonly ' : '';
      lines.push(
        `${jsdoc(docOf(prop), inner)}${inner}${readonly}${propKey(prop.name)}${optional ? '?' : ''}: ${print(propType, inner, self, optional)};`,
      );
    }
    return lines.length === 0 ? '{}' : `{\n${lines.join('\n')}\n${indent}}`;
  };

  /** A JavaScript literal for a literal type (the constants of `ContractValues`). */
  const literal = (type, indent) => {
    const f = type.flags;
    if (f & ts.TypeFlags.StringLiteral) return `'${type.value.replace(/'/g, "\\'")}'`;
    if (f & ts.TypeFlags.NumberLiteral) return String(type.value);
    if (checker.isTupleType(type) || checker.isArrayType(type)) {
      const els = checker.getTypeArguments(type).map((t) => literal(t, indent));
      return `[${els.join(', ')}]`;
    }
    if (f & ts.TypeFlags.Object) {
      const inner = `${indent}  `;
      const props = checker.getPropertiesOfType(type).map((p) => {
        return `${jsdoc(docOf(p), inner)}${inner}${propKey(p.name)}: ${literal(checker.getTypeOfSymbol(p), inner)},`;
      });
      return `{\n${props.join('\n')}\n${indent}}`;
    }
    throw new Error(`not a literal: ${checker.typeToString(type)}`);
  };

  const out = [
    "// GENERATED by client/scripts/gen-contract.mjs from server/src/contract.ts (the server's Zod schemas): do not",
    '// edit. `npm run gen:contract -w client` regenerates it; test/contract.test.ts fails while it is stale.',
    '// Plain declarations on purpose: the published package must not import the (unpublished) server or zod.',
    '',
  ];
  const valueNames = new Set();
  const values = exports.find((e) => e.name === VALUES);
  if (values) {
    const vt = typeOf(values.symbol);
    for (const prop of checker.getPropertiesOfType(vt)) {
      valueNames.add(prop.name);
      out.push(
        `${jsdoc(docOf(prop), '')}export const ${prop.name} = ${literal(checker.getTypeOfSymbol(prop), '')} as const;`,
      );
      out.push('');
    }
  }
  for (const { name, symbol } of typeExports) {
    const t = typeOf(symbol);
    const doc = jsdoc(docOf(symbol), '');
    const body = print(t, '', name);
    const isInterface = symbol.flags & ts.SymbolFlags.Interface && body.startsWith('{');
    out.push(isInterface ? `${doc}export interface ${name} ${body}` : `${doc}export type ${name} = ${body};`);
    out.push('');
  }
  return `${out.join('\n').trimEnd()}\n`;
}

const isMain = process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  const text = generateContract();
  if (process.argv.includes('--check')) {
    const current = readFileSync(OUTPUT, 'utf8');
    if (current !== text) {
      console.error('client/src/contract.ts is stale: run `npm run gen:contract -w client`');
      process.exit(1);
    }
  } else {
    writeFileSync(OUTPUT, text);
    console.log(`wrote ${OUTPUT}`);
  }
}
