// One command for every benchmark: `npm run bench` lists them, `npm run bench -- <name> [args]` runs one,
// `npm run bench -- all` runs them in turn. Each benchmark prints its own table of numbers.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const scripts = readdirSync(here)
  .filter((f) => /\.(ts|mjs)$/.test(f) && f !== 'run.mjs' && !f.startsWith('_'))
  .sort();
const byName = new Map(scripts.map((f) => [f.replace(/\.(ts|mjs)$/, ''), f]));

const [name, ...args] = process.argv.slice(2);
if (!name) {
  console.log(
    `usage: npm run bench -- <name|all> [args]\n\nbenchmarks:\n${[...byName.keys()].map((n) => `  ${n}`).join('\n')}`,
  );
  process.exit(0);
}
const selected = name === 'all' ? [...byName.values()] : [byName.get(name)];
if (selected.some((s) => s === undefined)) {
  console.error(`unknown benchmark "${name}"; run \`npm run bench\` for the list`);
  process.exit(2);
}
for (const file of selected) {
  console.log(`\n### ${file}`);
  // tsx (a dev dependency of this workspace) runs the TypeScript benchmarks.
  const result = spawnSync('npx', ['tsx', path.join(here, file), ...args], {
    stdio: 'inherit',
    cwd: path.join(here, '..', 'server'),
  });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
