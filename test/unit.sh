#!/usr/bin/env bash
# The fast inner loop: the unit tests of every package, in -short mode.
#   test/unit.sh                 # all of them
#   test/unit.sh -run TestX      # extra flags go to go test
# Left out, for test/run.sh (the full suite CI runs): the end-to-end and
# interoperability suites that run the oslayer binary or real verifiers
# (test/e2e, test/bench, test/node, test/oracle/..., test/preflight,
# test/sign/...). In -short mode the tests that need root (buildah:
# regtest.RequireRoot), envtest's kube-apiserver (k8senv.Assets) or a real
# verifier CLI (cosign, skopeo: regtest.Require) skip. Tests whose subject
# is not a registry use an in-memory one (regtest.Memory); request-count,
# fault and auth tests keep docker-registry.
# Tools come from test/setup.sh's cache when it ran (a missing tool skips
# its tests here; test/run.sh fails them instead).
set -euo pipefail
cd "$(dirname "$0")/.."
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
tools=${OSLAYER_TOOLS:-$HOME/.cache/oslayer-tools}
[ -d "$tools/bin" ] && export PATH="$tools/bin:$PATH"
# As test/run.sh: the package stage's buildah executor builds with these.
case "${GOFLAGS:-}" in
*-tags=*) ;;
*) export GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper" ;;
esac
slow='/test/(e2e|bench|node|oracle|preflight|sign)(/|$)'
mapfile -t pkgs < <(go list ./... | grep -Ev "$slow")
exec go test -short -count=1 -timeout 10m "$@" "${pkgs[@]}"
