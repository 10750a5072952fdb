#!/usr/bin/env bash
# Builds the oslayer command once for a test run into DIR; test/run.sh and
# test/unit.sh export the paths, and test/oslayerbin hands them to the tests
# that run the command:
#   DIR/oslayer         with the package stage's buildah executor
#                       ($OSLAYER_BIN)
#   DIR/oslayer-static  as the Containerfile builds it: static with cgo,
#                       netgo and osusergo ($OSLAYER_BIN_STATIC: the
#                       controller's tests run it)
# The flags are test/oslayerbin's (a test there checks that they agree).
#   test/oslayer-bin.sh DIR [default] [static]   (both when none is named)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: test/oslayer-bin.sh DIR [default] [static]}
shift
[ $# -gt 0 ] || set -- default static
tags=containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper
mkdir -p "$dir"
for v in "$@"; do
  case "$v" in
  default) go build -tags "$tags" -o "$dir/oslayer" ./cmd/oslayer ;;
  static)
    CGO_ENABLED=1 go build -trimpath -tags "$tags,netgo,osusergo" \
      -ldflags "-s -w -linkmode external -extldflags -static" -o "$dir/oslayer-static" ./cmd/oslayer
    ;;
  *) echo "test/oslayer-bin.sh: unknown variant $v" >&2; exit 2 ;;
  esac
done
