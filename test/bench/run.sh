#!/usr/bin/env bash
# Benchmark oslayer against crane append and buildah bud on one machine,
# loopback registry, synthetic FCOS-shaped base. Prints a markdown table
# with wall time, bytes down/up, peak RSS and the ratios, and writes it to
# test/bench/results/.
#   test/bench/run.sh              # ~14 MB base, 1/10/100 pools
#   test/bench/run.sh -bench.gb    # ~1 GB base
#   test/bench/run.sh -bench.fleet      # oslayer fleet build of 1,000 pools, unchanged,
#                                       # vs separate processes and crane append
#                                       # (BENCH=BenchmarkFleet test/bench/run.sh does the same)
#   test/bench/run.sh -bench.controller # the build service (oslayer controller
#                                       # against kube-apiserver and etcd)
set -euo pipefail
cd "$(dirname "$0")/../.."
case "${1:-}" in
-bench.fleet)
  shift
  BENCH=BenchmarkFleet
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
