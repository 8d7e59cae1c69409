// Build step after tsc: copies what the compiled server reads from disk at run time (the SQL migrations and their
// journal, the bundled email templates), which tsc does not emit. Without it `node dist/server.js` fails with "Can't find meta/_journal.json".
import { cpSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const assets = ['infra/migrations', 'email/templates'];
for (const asset of assets) {
  const to = path.join(root, 'dist', asset);
  // A migration deleted from src must not linger in dist.
  rmSync(to, { recursive: true, force: true });
  cpSync(path.join(root, 'src', asset), to, { recursive: true });
}
