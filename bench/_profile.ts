// Summarises a V8 .cpuprofile (node --cpu-prof): self time per function and per package, over all samples or
// only those inside a time window (microseconds on the monotonic clock, the profile's own timeline).
//
// Usage: npx tsx bench/_profile.ts <file.cpuprofile> [--top 25] [--from-us N --to-us M]
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTime {
  name: string;
  ms: number;
  share: number;
}

/** The package a script belongs to (node_modules/<pkg>), Herald's own code, or Node's internals. */
function packageOf(url: string): string {
  if (url === '') return '(native / VM)';
  if (url.startsWith('node:')) return 'node internals';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') ? `${rest[0]}/${rest[1]}` : (rest[0] ?? url);
  }
  const src = url.indexOf('/server/src/');
  if (src >= 0) return 'herald (server/src)';
  return url.replace(/^file:\/\//, '');
}

function shortUrl(url: string): string {
  if (url === '') return '';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) return url.slice(nm + 'node_modules/'.length);
  const src = url.indexOf('/server/src/');
  if (src >= 0) return url.slice(src + 1);
  return url.replace(/^file:\/\//, '');
}

/** A window on the monotonic clock in microseconds (`process.hrtime.bigint() / 1000n` in any process here). */
export interface Window {
  fromUs: number;
  toUs: number;
}

export function summarise(file: string, top = 25, window?: Window) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  // V8 stamps samples with the same monotonic clock as process.hrtime (Linux CLOCK_MONOTONIC), so a window
  // measured by the load generator selects the samples of the load alone (no start-up, no warm-up).
  const inWindow =
    window && window.fromUs < profile.endTime && window.toUs > profile.startTime ? window : undefined;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const fn = new Map<string, number>();
  const pkg = new Map<string, number>();
  let total = 0;
  let idle = 0;
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    const node = byId.get(profile.samples[i] ?? -1);
    // The time a sample stands for is the delta to the next one.
    const us = profile.timeDeltas[i + 1] ?? 0;
    if (!node) continue;
    if (inWindow && (at < inWindow.fromUs || at > inWindow.toUs)) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') {
      idle += us;
      continue;
    }
    total += us;
    const key = `${functionName || '(anonymous)'} ${shortUrl(url)}${url ? `:${lineNumber + 1}` : ''}`;
    fn.set(key, (fn.get(key) ?? 0) + us);
    const p = ['(garbage collector)', '(program)'].includes(functionName) ? functionName : packageOf(url);
    pkg.set(p, (pkg.get(p) ?? 0) + us);
  }
  const rank = (m: Map<string, number>, n: number): SelfTime[] =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, us]) => ({
        name,
        ms: Math.round(us / 1000),
        share: Math.round((us / total) * 1000) / 10,
      }));
  return {
    windowed: inWindow !== undefined,
    busyMs: Math.round(total / 1000),
    idleMs: Math.round(idle / 1000),
    functions: rank(fn, top),
    packages: rank(pkg, 15),
  };
}

export function printProfileSummary(file: string, top = 20, window?: Window): void {
  const s = summarise(file, top, window);
  console.log(
    `${file}\n${s.windowed ? 'load window only' : 'whole profile'}: busy ${s.busyMs} ms, idle ${s.idleMs} ms (share = % of busy time)`,
  );
  console.table(s.packages.map((p) => ({ package: p.name, 'self ms': p.ms, '%': p.share })));
  console.table(s.functions.map((f) => ({ function: f.name, 'self ms': f.ms, '%': f.share })));
}

/**
 * Runs `measure` (the load to profile; it returns the line to print) against a server started under
 * `--cpu-prof --cpu-prof-dir=<profileDir>`, stops the server so the profile is written, and prints the summary
 * of that load's window only (not the start-up or the warm-up).
 */
export async function profileLoad(
  server: { stop(): Promise<void> },
  profileDir: string,
  measure: () => Promise<string>,
  top = 25,
): Promise<void> {
  const fromUs = Number(process.hrtime.bigint() / 1000n);
  const line = await measure();
  const window = { fromUs, toUs: Number(process.hrtime.bigint() / 1000n) };
  console.log(line);
  await server.stop();
  const file = readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no profile written in ${profileDir}`);
  printProfileSummary(path.join(profileDir, file), top, window);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: npx tsx bench/_profile.ts <file.cpuprofile> [--top 25]');
    process.exit(2);
  }
  const arg = (name: string) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? Number(process.argv[i + 1]) : undefined;
  };
  // --from-us / --to-us: a window a benchmark printed (e.g. sse-fanout's rounds), on the profile's clock.
  const fromUs = arg('--from-us');
  const toUs = arg('--to-us');
  printProfileSummary(
    file,
    arg('--top') ?? 25,
    fromUs !== undefined && toUs !== undefined ? { fromUs, toUs } : undefined,
  );
}
