// Owns the start-up check of the Node.js version against `engines` (package.json): npm warns about it only at
// install time, so a service started on an end-of-life Node would otherwise run with no word.
/** Keep equal to `engines.node` in package.json (a test checks it). */
export const REQUIRED_NODE = '22.12.0';

function parts(version: string): number[] {
  return version
    .replace(/^v/, '')
    .split('.')
    .map((p) => Number.parseInt(p, 10) || 0);
}

/** True when `version` is older than `required` (major.minor.patch). */
export function isOlder(version: string, required: string): boolean {
  const [a, b] = [parts(version), parts(required)];
  for (let i = 0; i < 3; i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    if (x !== y) return x < y;
  }
  return false;
}

/** The one warning line for an old Node, or undefined. The version is injectable for tests. */
export function nodeVersionWarning(version: string = process.versions.node): string | undefined {
  if (!isOlder(version, REQUIRED_NODE)) return undefined;
  return (
    `Node.js ${version} is older than the >=${REQUIRED_NODE} Herald requires (package.json engines); it may fail ` +
    'in unexpected ways. Upgrade to Node.js 24 LTS (Node 20 reached end of life in April 2026).'
  );
}
