#!/usr/bin/env bash
# The production install, as a runtime image would do it (docs/operations.md, "Production install"): after
# `npm ci && npm run build` here, copy only what the runtime stage needs into a clean folder, run
# `npm ci --omit=dev` there and check that it
#   - prints no error and installs no test or build tool (vitest, vite, drizzle-kit, tsx, happy-dom, ...),
#   - stays within HERALD_PROD_MAX_MB (default 110: under half of the 222 MB of issue 29) of node_modules,
#   - and that `npm run start:prod` (NODE_ENV=production, PostgreSQL + Redis) answers /health 200 and serves the
#     web app, then exits 0 on SIGTERM.
# Needs PostgreSQL (PGHOST/PGPORT/PGUSER, default 127.0.0.1:5432 postgres) and Redis (HERALD_PROD_CACHE_URL,
# default redis://127.0.0.1:6379). Keeps the folder on failure (its path is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
MAX_MB="${HERALD_PROD_MAX_MB:-110}"
CACHE_URL_CHECK="${HERALD_PROD_CACHE_URL:-redis://127.0.0.1:6379}"
export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"

fail() {
  echo "prod-install-check: $*" >&2
  exit 1
}

[ -f server/dist/server.js ] || fail "server/dist is missing: run npm run build first"
[ -f web/dist/index.html ] || fail "web/dist is missing: run npm run build first"

# .npmrc turns npm's automatic peer installs off (that is what keeps the test tools out of --omit=dev); make sure
# every peer the installed packages declare is still satisfied by a declared dependency.
if ! npm ls --all --legacy-peer-deps=false >/dev/null 2>&1; then
  npm ls --all --legacy-peer-deps=false 2>&1 | grep -E 'invalid|missing|UNMET (PEER )?DEPENDENCY' | grep -v OPTIONAL >&2 || true
  fail "a peer dependency is missing or invalid: add it to the dependencies of the workspace that needs it"
fi

DIR="$(mktemp -d "${TMPDIR:-/tmp}/herald-prod.XXXXXX")"
DB="herald_prod_check_$$"
PID=""
cleanup() {
  local code=$?
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then kill -KILL "$PID" 2>/dev/null || true; fi
  dropdb --if-exists --force "$DB" >/dev/null 2>&1 || true
  if [ "$code" -eq 0 ]; then rm -rf "$DIR"; else echo "prod-install-check: folder kept at $DIR" >&2; fi
}
trap cleanup EXIT

# What a runtime image holds: manifests + lockfile + .npmrc, the postinstall script, the build outputs.
cp package.json package-lock.json .npmrc "$DIR/"
mkdir -p "$DIR/scripts"
cp scripts/build-web.mjs "$DIR/scripts/"
for ws in server client web bench; do
  mkdir -p "$DIR/$ws"
  cp "$ws/package.json" "$DIR/$ws/"
done
cp -r server/dist "$DIR/server/dist"
cp -r web/dist "$DIR/web/dist"

cd "$DIR"
echo "== npm ci --omit=dev in $DIR"
started=$SECONDS
# --prefer-offline: the build stage's npm cache already holds every tarball; no metadata round trips.
if ! npm ci --omit=dev --prefer-offline --no-audit --no-fund >install.log 2>&1; then
  cat install.log >&2
  fail "npm ci --omit=dev failed"
fi
if grep -Ei '(^|[^a-z])(error|err!)|stack|Cannot find' install.log >/dev/null; then
  cat install.log >&2
  fail "npm ci --omit=dev printed an error"
fi
if grep -E 'npm warn' install.log >/dev/null; then
  cat install.log >&2
  fail "npm ci --omit=dev printed a warning"
fi

found=""
for pkg in vitest vite drizzle-kit tsx happy-dom esbuild typescript @vitejs/plugin-react @biomejs/biome \
  pino-pretty @electric-sql/pglite react react-dom smtp-server mailparser oidc-provider autocannon; do
  [ -e "node_modules/$pkg" ] && found="$found $pkg"
done
[ -z "$found" ] || fail "the production install contains dev packages:$found (npm explain <pkg> says why)"

size_mb="$(du -sm node_modules | cut -f1)"
packages="$(node -e 'console.log(Object.keys(require("./node_modules/.package-lock.json").packages).length)')"
echo "   node_modules: ${size_mb} MB on disk ($(du -sh --apparent-size node_modules | cut -f1) apparent), ${packages} packages, installed in $((SECONDS - started)) s"
[ "$size_mb" -le "$MAX_MB" ] || fail "node_modules is ${size_mb} MB, over the ${MAX_MB} MB budget"

echo "== npm run start:prod (NODE_ENV=production)"
started=$SECONDS
createdb "$DB"
PORT="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
NODE_ENV=production HOST=127.0.0.1 PORT="$PORT" \
  DATABASE_URL="postgres://$PGUSER@$PGHOST:$PGPORT/$DB" CACHE_URL="$CACHE_URL_CHECK" \
  CACHE_KEY_PREFIX="herald-prod-check-$$:" AUTH_SECRET="$(node -e 'console.log(require("crypto").randomBytes(32).toString("hex"))')" \
  API_BASE_URL="http://127.0.0.1:$PORT" FE_BASE_URL="http://127.0.0.1:$PORT" \
  npm run start:prod >server.log 2>&1 &
PID=$!
healthy=""
for _ in $(seq 1 120); do
  if curl -fsS -o /dev/null "http://127.0.0.1:$PORT/health" 2>/dev/null; then healthy=yes; break; fi
  kill -0 "$PID" 2>/dev/null || break
  sleep 0.5
done
[ -n "$healthy" ] || { cat server.log >&2; fail "start:prod did not answer /health 200"; }
curl -fsS -H 'accept: text/html' "http://127.0.0.1:$PORT/sign-in" | grep -q '<div id="root">' ||
  { cat server.log >&2; fail "start:prod does not serve the web app"; }
kill -TERM "$PID"
set +e
wait "$PID"
code=$?
set -e
PID=""
[ "$code" -eq 0 ] || { cat server.log >&2; fail "start:prod exited $code after SIGTERM"; }
if grep -E '"level":(50|60)' server.log >/dev/null; then
  cat server.log >&2
  fail "start:prod logged an error"
fi
echo "   start:prod served /health and the web app from a ${size_mb} MB production install, and exited 0 on SIGTERM ($((SECONDS - started)) s)"
