// Prints the size of the SDK as an app bundles it (ESM, minified, gzip at the default level), with and without
// better-auth's client; React stays external (peer dependency). Numbers go to docs/performance.md ("Client SDK").
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const REACT = ['react', 'react/jsx-runtime', 'react-dom'];
const BETTER_AUTH = ['better-auth', 'better-auth/*'];

async function measure(label, contents, external) {
  const result = await build({
    stdin: { contents, loader: 'tsx', resolveDir: process.cwd(), sourcefile: 'entry.tsx' },
    bundle: true,
    minify: true,
    format: 'esm',
    write: false,
    external,
    logLevel: 'error',
  });
  const code = result.outputFiles[0].contents;
  return { label, minified: code.length, gzip: gzipSync(code).length };
}

async function measureCss(label, file) {
  const result = await build({
    entryPoints: [file],
    bundle: true,
    minify: true,
    write: false,
    logLevel: 'error',
  });
  const code = result.outputFiles[0].contents;
  return { label, minified: code.length, gzip: gzipSync(code).length };
}

const core = "export * from './src/index.ts';";
const react = "export * from './src/react.tsx';";
const hooks =
  "export { HeraldProvider, useChat, useHeraldClient, useNotifications, useSession, useUnreadCount } from './src/react.tsx';";
const components =
  "export { ChatRoom, NotificationBell, NotificationInbox, RoomList } from './src/react.tsx';";
const rows = [
  await measure('core, with better-auth', core, REACT),
  await measure('core, without better-auth', core, [...REACT, ...BETTER_AUTH]),
  await measure('React bindings alone (provider + hooks)', hooks, REACT),
  await measure('components alone (with the hooks and constants they use)', components, REACT),
  await measure('whole React entry (bindings + components)', react, REACT),
  await measure('core + React entry, with better-auth', `${core}\n${react}`, REACT),
  await measure('core + React entry, without better-auth', `${core}\n${react}`, [...REACT, ...BETTER_AUTH]),
  await measureCss('styles.css (minified)', './src/styles.css'),
];
console.log('| Entry | Minified | min + gzip |\n|---|---|---|');
for (const r of rows)
  console.log(`| ${r.label} | ${r.minified.toLocaleString('en')} B | ${r.gzip.toLocaleString('en')} B |`);
