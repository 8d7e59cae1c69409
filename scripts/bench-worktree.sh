#!/usr/bin/env bash
# A second worktree of this repository at another commit, ready to run `npm run bench -- …` from, for A/B pairs
# (docs/performance.md "Comparing two commits"). It shares this tree's installed packages but links the workspace
# packages (@herald/server, …) to its OWN folders: linking node_modules in whole would make the testkit — and so
# every benchmark that starts servers through it — run this tree's server code instead of the other commit's.
# Usage: scripts/bench-worktree.sh <commit> [dir]     (then: cd <dir> && npm run bench -- <name> …)
set -euo pipefail
rev=${1:?usage: scripts/bench-worktree.sh <commit> [dir]}
root=$(git rev-parse --show-toplevel)
dir=${2:-/tmp/herald-bench-$(git -C "$root" rev-parse --short "$rev")}
git -C "$root" worktree add -f --detach "$dir" "$rev" >/dev/null
mkdir -p "$dir/node_modules/@herald"
shopt -s dotglob
for entry in "$root"/node_modules/*; do
  name=$(basename "$entry")
  [ "$name" = "@herald" ] || ln -sfn "$entry" "$dir/node_modules/$name"
done
for pkg in "$root"/node_modules/@herald/*; do
  name=$(basename "$pkg")
  target=$(basename "$(readlink -f "$pkg")")
  [ -d "$dir/$target" ] && ln -sfn "$dir/$target" "$dir/node_modules/@herald/$name"
done
for ws in server client web bench; do
  if [ -d "$root/$ws/node_modules" ] && [ -d "$dir/$ws" ]; then ln -sfn "$root/$ws/node_modules" "$dir/$ws/node_modules"; fi
done
echo "$dir"
