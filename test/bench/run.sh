#!/usr/bin/env bash
# Benchmark oslayer against crane append and buildah bud on one machine,
# loopback registry, synthetic FCOS-shaped base. Prints a markdown table
# with wall time, bytes down/up, peak RSS and the ratios, and writes it to
# test/bench/results/.
#   test/bench/run.sh              # ~14 MB base, 1/10/100 pools
#   test/bench/run.sh -bench.gb    # ~1 GB base
#   test/bench/run.sh -bench.fleet      # oslayer fleet build of 1,000 pools, unchanged,
#                                       # vs separate processes and crane append, on
#                                       # distribution v3 (-bench.registry docker-registry:
#                                       # Debian's 2.8)
#   test/bench/run.sh -bench.controller # the build service (oslayer controller
#                                       # against kube-apiserver and etcd)
#   test/bench/run.sh -bench.prune      # oslayer prune's dry run over 1,000 images
#                                       # (100 pools × 10) with a cluster's references
#   test/bench/run.sh -bench.diff [-bench.gb] # oslayer diff of two pool images
#   test/bench/run.sh -bench.wan        # across a WAN: a 400-layer base in docker-registry
#                                       # behind a 30 ms proxy, oslayer against crane append,
#                                       # a fleet of 300 pools, and the round-trip sweep
#                                       # (CSV and chart into docs/)
set -euo pipefail
cd "$(dirname "$0")/../.."
case "${1:-}" in
-bench.fleet)
  shift
  BENCH=BenchmarkFleet
  # distribution v3 (built once, then cached), logging warnings only,
  # storing on tmpfs when there is one; "-bench.registry docker-registry"
  # after -bench.fleet runs Debian's 2.8 instead.
  export OSLAYER_BENCH_REGISTRY=1
  fleet_args=(-bench.registry distribution-registry -bench.registry-quiet)
  [ -d /dev/shm ] && [ -w /dev/shm ] && fleet_args+=(-bench.registry-dir /dev/shm)
  set -- "${fleet_args[@]}" "$@"
  ;;
-bench.prune)
  shift
  BENCH=BenchmarkPrune
  export OSLAYER_KUBE=1 OSLAYER_REQUIRE_KUBE=1
  ;;
-bench.diff)
  shift
  BENCH=BenchmarkDiff
  ;;
-bench.wan)
  shift
  BENCH=BenchmarkWAN
  set -- -bench.wan-sweep 0,10ms,30ms,100ms -bench.wan-csv "$PWD/docs/wan-sweep.csv" "$@"
  WAN_CHART=1
  ;;
-bench.controller)
  shift
  BENCH=BenchmarkController
  # kube-apiserver and etcd for envtest (built once, then cached).
  export OSLAYER_KUBE=1 OSLAYER_REQUIRE_KUBE=1
  ;;
esac
tools=$(bash test/setup.sh | tail -n 1)
export PATH="$tools:$PATH"
mkdir -p test/bench/results
go test -run '^$' -bench "${BENCH:-BenchmarkPeers}" -benchtime 1x -timeout 60m ./test/bench/ \
  -args -bench.md "$PWD/test/bench/results/${BENCH:-latest}.md" "$@"
if [ -n "${WAN_CHART:-}" ]; then
  # The chart of the sweep, drawn by gonum/plot (a module of its own).
  (cd test/bench/chart && go run . ../../../docs/wan-sweep.csv ../../../docs/wan-sweep.svg)
fi
