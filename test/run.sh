#!/usr/bin/env bash
# The project's test command (README, CI): installs what the tests need,
# then runs vet, gofmt, the whole test suite against real tools, and every
# fuzz target for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
# Go and the tool cache need a home directory, even where none is set.
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"

# On a fresh machine the modules of every module here download (network)
# while setup.sh builds the tools (CPU); both end before the first go vet.
(
  for m in . extension test/oracle/nodeagent test/tekton test/openshift; do
    (cd "$m" && go mod download) || echo "run.sh: go mod download in $m failed; the step that needs it will say why" >&2
  done
) &
prefetch=$!
tools=$(bash test/setup.sh | tail -n 1)
export PATH="$tools:$PATH"
wait "$prefetch"
# Missing tools or fixtures fail tests instead of skipping them.
export OSLAYER_REQUIRE_TOOLS=1
# setup.sh built kube-apiserver and etcd (unless OSLAYER_KUBE=0): the
# controller's envtest tests fail instead of skipping without them.
if [ "${OSLAYER_KUBE:-1}" != 0 ]; then
  export OSLAYER_REQUIRE_KUBE=1
fi
# The package stage's buildah executor (packagestage/bud) builds only with
# these tags (no gpgme, btrfs or devicemapper C libraries); without them the
# package is left out and the rest builds as before.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper"
FUZZTIME=${FUZZTIME:-15s}

echo "== go vet"
go vet ./...
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi

echo "== shell scripts and merge leftovers"
for f in $(git ls-files '*.sh' .ci/run); do bash -n "$f"; done
if git grep -n -E '^(<<<<<<<|>>>>>>>) ' -- . ':!*.go'; then
  echo "merge conflict markers left in the tree" >&2
  exit 1
fi

echo "== oslayer, built once for every test package that runs it"
bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
bash test/oslayer-bin.sh "$bindir"
export OSLAYER_BIN="$bindir/oslayer" OSLAYER_BIN_STATIC="$bindir/oslayer-static"

echo "== go test"
go test -count=1 -timeout 40m ./...

echo "== benchmarks (smoke: each once, at a tiny size, no figures checked)"
# Every benchmark of test/bench runs once so none of them rots; the real
# runs are test/bench/run.sh's.
go test -count=1 -run '^$' -bench . -benchtime 1x -timeout 20m ./test/bench/ -args \
  -bench.scale 0.001 -bench.pools 2 -bench.parallel 2 -bench.reps 1 -bench.files 200 \
  -bench.fleet-clusters 1 -bench.fleet-pools 2 -bench.fleet-jobs 2 \
  -bench.changes 1 -bench.ctl-pools 2 -bench.cold-reps 1 -bench.agent-mib 1 \
  -bench.imageref-scale 0.001 -bench.prune-pools 2 -bench.prune-images 6 \
  -bench.wan-layers 5 -bench.wan-fleet 2 -bench.wan-reps 1 -bench.wan-rtt 2ms -bench.wan-sweep 0,2ms

echo "== node-agent oracle (test/oracle/nodeagent, a module of its own)"
(
  cd test/oracle/nodeagent
  # gardener's module graph is large; go mod download fills the module
  # cache once and is a no-op afterwards.
  go mod download
  # It builds oslayer from this checkout: a dependency change of the main
  # module needs `go mod tidy` here too.
  go mod tidy -diff
  go vet ./...
  go test -count=1 -timeout 20m ./...
)

echo "== OS extension (extension, a module of its own)"
(
  cd extension
  # As its Containerfile builds it (TestContainerfileBuild runs that
  # command), so the tests and that build share one compilation.
  export CGO_ENABLED=0 GOFLAGS="$GOFLAGS -trimpath"
  go mod download
  # It builds oslayer from this checkout, like the node-agent oracle.
  go mod tidy -diff
  go vet ./...
  go test -count=1 -timeout 20m ./...
  # Its benchmark once, at a tiny size (the real run: docs/extension.md).
  go test -count=1 -run '^$' -bench . -benchtime 1x -timeout 10m ./test/bench/ -args \
    -bench.scale 0.001 -bench.changes 1 -bench.oscs 2
)

# The Tekton example and the OpenShift API checks: modules of their own.
for m in test/tekton test/openshift; do
  echo "== $m (a module of its own)"
  (
    cd "$m"
    go mod download
    go mod tidy -diff
    go vet ./...
    go test -count=1 -timeout 10m ./...
  )
done

echo "== fuzz (${FUZZTIME} each)"
# fuzz_one PKG FN runs one target. Go's fuzzing coordinator can fail a target
# with "context deadline exceeded" at the -fuzztime boundary although nothing
# failed (a race between the deadline and its workers on a loaded machine). A
# real failure always writes its input under testdata/fuzz/FN; so a run that
# failed with only that message and wrote no input is run again (at most
# twice more), and any other failure, or that one three times, fails the
# suite.
fuzz_one() {
  local pkg=$1 fn=$2 log before after try
  log=$(mktemp)
  for try in 1 2 3; do
    before=$(ls "$pkg/testdata/fuzz/$fn" 2>/dev/null || true)
    # A package of a nested module (extension/) runs from that module.
    local mod=${pkg#./} rel
    while [ "$mod" != . ] && [ ! -f "$mod/go.mod" ]; do mod=$(dirname "$mod"); done
    rel=./${pkg#./$mod/}
    [ "$mod" = . ] && rel=$pkg
    if (cd "$mod" && go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 3s "$rel") 2>&1 | tee "$log"; then
      rm -f "$log"
      return 0
    fi
    after=$(ls "$pkg/testdata/fuzz/$fn" 2>/dev/null || true)
    if [ "$try" -lt 3 ] && [ "$before" = "$after" ] &&
      grep -q '^    context deadline exceeded$' "$log" && ! grep -q 'Failing input written' "$log"; then
      echo "-- $pkg $fn: the fuzzing coordinator's deadline race (no failing input written); once more"
      continue
    fi
    rm -f "$log"
    return 1
  done
}
# Every Fuzz target in the tree, run one at a time.
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
  pkg="./$(dirname "${f#./}")"
  for fn in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | cut -d' ' -f2); do
    echo "-- $pkg $fn"
    fuzz_one "$pkg" "$fn"
  done
done
echo "== all tests passed"
