#!/usr/bin/env bash
# Installs what oslayer's tests need on a fresh Debian machine (idempotent):
# Debian packages (registry, umoci, buildah, systemd tools) and Go-built
# clients (crane, cosign, and skopeo with sigstore verification, which
# Debian's skopeo build leaves out). Go tools land in $OSLAYER_TOOLS/bin.
set -euo pipefail
# Go and the tool cache need a home directory, even where none is set.
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"

OSLAYER_TOOLS=${OSLAYER_TOOLS:-$HOME/.cache/oslayer-tools}
BUILD_TAGS="containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper"
mkdir -p "$OSLAYER_TOOLS/bin"

need_apt=()
for pair in docker-registry:docker-registry umoci:umoci buildah:buildah systemctl:systemd systemd-tmpfiles:systemd; do
  cmd=${pair%%:*} pkg=${pair##*:}
  command -v "$cmd" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need_apt[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

gobin() { # gobin NAME MODULE@VERSION
  [ -x "$OSLAYER_TOOLS/bin/$1" ] && return 0
  echo "setup: go install $2" >&2
  GOBIN="$OSLAYER_TOOLS/bin" go install "$2"
}
gobin crane github.com/google/go-containerregistry/cmd/crane@v0.22.1
gobin cosign github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5

if [ ! -x "$OSLAYER_TOOLS/bin/skopeo" ]; then
  echo "setup: building skopeo v1.16.1 with sigstore support" >&2
  scratch=$(mktemp -d)
  (
    cd "$scratch"
    go mod init oslayer.invalid/skopeo-build >/dev/null 2>&1
    GONOSUMDB=github.com/containers/skopeo GOFLAGS=-mod=mod go get github.com/containers/skopeo@v1.16.1 >/dev/null 2>&1
    GONOSUMDB=github.com/containers/skopeo GOFLAGS=-mod=mod go build -tags "$BUILD_TAGS" -o "$OSLAYER_TOOLS/bin/skopeo" github.com/containers/skopeo/cmd/skopeo
  )
  rm -rf "$scratch"
fi
echo "$OSLAYER_TOOLS/bin"
