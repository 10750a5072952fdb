#!/usr/bin/env bash
# Runs a command in a fresh clone of the committed tree (HEAD), in a new
# temporary folder that holds nothing but the clone: no sibling folders, no
# fixtures or tools beside it. A test that reads anything outside the
# repository through a relative path (a sibling folder, ../../...) fails there.
#
#   test/fresh-clone.sh                       # the whole suite: bash test/run.sh
#   test/fresh-clone.sh go test ./render/...  # any command, run in the clone
#
# Uncommitted changes are not in the clone; the script says so.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ]; then
  echo "fresh-clone: uncommitted changes are not tested (clone of HEAD)" >&2
fi
parent=$(mktemp -d)
trap 'chmod -R u+w "$parent" 2>/dev/null; rm -rf "$parent"' EXIT
git clone --quiet --no-local --no-hardlinks "$src" "$parent/oslayer"
# The clone's parent folder holds only the clone.
if [ "$(ls -A "$parent")" != "oslayer" ]; then
  echo "fresh-clone: $parent holds more than the clone" >&2
  exit 1
fi
cd "$parent/oslayer"
echo "== fresh clone of $(git rev-parse --short HEAD) in $PWD"
if [ $# -eq 0 ]; then
  set -- bash test/run.sh
fi
"$@"
