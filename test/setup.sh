#!/usr/bin/env bash
# Installs what oslayer's tests need on a fresh Debian machine (idempotent):
# Debian packages (registry, umoci, buildah, systemd tools, ostree, and
# libblkid-dev for Ignition's cgo build) and Go-built clients (crane, cosign,
# skopeo with sigstore verification, which Debian's skopeo build leaves out,
# and ignition-apply at the Ignition version of go.mod). Go tools land in
# $OSLAYER_TOOLS/bin.
set -euo pipefail
# Go and the tool cache need a home directory, even where none is set.
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"

OSLAYER_TOOLS=${OSLAYER_TOOLS:-$HOME/.cache/oslayer-tools}
BUILD_TAGS="containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper"
mkdir -p "$OSLAYER_TOOLS/bin"

need_apt=()
for pair in docker-registry:docker-registry umoci:umoci buildah:buildah systemctl:systemd systemd-tmpfiles:systemd ostree:ostree rpmbuild:rpm dpkg-deb:dpkg; do
  cmd=${pair%%:*} pkg=${pair##*:}
  command -v "$cmd" >/dev/null 2>&1 || need_apt+=("$pkg")
done
# Ignition's cgo code includes blkid.h.
[ -x "$OSLAYER_TOOLS/bin/ignition-apply" ] || dpkg -s libblkid-dev >/dev/null 2>&1 || need_apt+=(libblkid-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need_apt[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Debian packages the package-stage tests assemble a test base from: only
# their files are needed (apt-get download, unpacked by the test with
# dpkg-deb -x), nothing is installed. busybox-static is the shell (dash
# where a step must run a real rpm, not busybox's applet); rpm,
# rpm-common and the libraries /usr/bin/rpm links are the package manager.
mkdir -p "$OSLAYER_TOOLS/debs"
for pkg in busybox-static dash rpm rpm-common librpm9 librpmio9 libbz2-1.0 libc6 libcap2 libgcrypt20 \
  libgpg-error0 liblua5.3-0 liblzma5 libpopt0 libsqlite3-0 libzstd1 zlib1g; do
  ls "$OSLAYER_TOOLS/debs/${pkg}_"*.deb >/dev/null 2>&1 && continue
  echo "setup: apt-get download $pkg" >&2
  if ! (cd "$OSLAYER_TOOLS/debs" && apt-get download -qq "$pkg" 2>/dev/null); then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    (cd "$OSLAYER_TOOLS/debs" && apt-get download -qq "$pkg" 2>/dev/null)
  fi
done

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
# ignition-apply is Ignition's multi-call binary (main package internal/)
# invoked under that name, built at the version go.mod pins.
IGNITION_VERSION=v2.24.0
if [ ! -x "$OSLAYER_TOOLS/bin/ignition-apply" ]; then
  echo "setup: building ignition-apply $IGNITION_VERSION" >&2
  scratch=$(mktemp -d)
  CGO_ENABLED=1 GOBIN="$scratch" go install \
    -ldflags "-X github.com/coreos/ignition/v2/internal/version.Raw=$IGNITION_VERSION" \
    "github.com/coreos/ignition/v2/internal@$IGNITION_VERSION"
  mv "$scratch/internal" "$OSLAYER_TOOLS/bin/ignition-apply"
  rm -rf "$scratch"
fi

# The fleet benchmark's registry (test/bench/run.sh -bench.fleet sets
# OSLAYER_BENCH_REGISTRY=1): CNCF distribution v3, the current upstream
# release, as distribution-registry. Debian's docker-registry (2.8) builds
# a router, compiling every route's regular expression, for every request
# (fixed upstream in distribution#3683, not in 2.8): about half its CPU, on
# the cores the benchmark shares with it. The tests keep Debian's.
DISTRIBUTION_VERSION=v3.1.2
if [ "${OSLAYER_BENCH_REGISTRY:-0}" = 1 ] && [ ! -x "$OSLAYER_TOOLS/bin/distribution-registry" ]; then
  echo "setup: building distribution $DISTRIBUTION_VERSION (registry)" >&2
  scratch=$(mktemp -d)
  GOBIN="$scratch" go install "github.com/distribution/distribution/v3/cmd/registry@$DISTRIBUTION_VERSION"
  mv "$scratch/registry" "$OSLAYER_TOOLS/bin/distribution-registry"
  rm -rf "$scratch"
fi

# The controller's tests (package controller) run controller-runtime's envtest
# against a real kube-apiserver and etcd. kube-apiserver is built from
# k8s.io/kubernetes at the version matching client-go, with every k8s.io/*
# staging module replaced by the matching v0.x release (the repository's own
# replace directives point into its tree and do not apply to a dependency).
# Debian's etcd (3.4) is older than the 3.7 client kube-apiserver 1.37 is
# built with, so etcd comes from the module proxy too. Both land in
# $OSLAYER_TOOLS/kube/<version>/, which is what KUBEBUILDER_ASSETS names
# (test/k8senv finds it there). Built by default (cached after the first
# run); OSLAYER_KUBE=0 skips them, and then the envtest tests skip too.
if [ "${OSLAYER_KUBE:-1}" != 0 ]; then
KUBE_VERSION=v1.37.2 KUBE_STAGING_VERSION=v0.37.2 ETCD_VERSION=v3.7.3
kube_assets="$OSLAYER_TOOLS/kube/$KUBE_VERSION"
mkdir -p "$kube_assets"
if [ ! -x "$kube_assets/kube-apiserver" ]; then
  echo "setup: building kube-apiserver $KUBE_VERSION" >&2
  scratch=$(mktemp -d)
  (
    cd "$scratch"
    go mod init oslayer.invalid/kube-apiserver-build >/dev/null 2>&1
    for m in api apiextensions-apiserver apimachinery apiserver cli-runtime client-go \
      cloud-provider cluster-bootstrap code-generator component-base component-helpers \
      controller-manager cri-api cri-client cri-streaming csi-translation-lib \
      dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator \
      kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics \
      mount-utils pod-security-admission sample-apiserver sample-cli-plugin \
      sample-controller streaming; do
      go mod edit -replace "k8s.io/$m=k8s.io/$m@$KUBE_STAGING_VERSION"
    done
    GOFLAGS=-mod=mod go get "k8s.io/kubernetes@$KUBE_VERSION" >/dev/null 2>&1
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$kube_assets/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  )
  rm -rf "$scratch"
fi
if [ ! -x "$kube_assets/etcd" ]; then
  echo "setup: building etcd $ETCD_VERSION" >&2
  scratch=$(mktemp -d)
  (
    cd "$scratch"
    go mod init oslayer.invalid/etcd-build >/dev/null 2>&1
    GOFLAGS=-mod=mod go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$kube_assets/etcd" go.etcd.io/etcd/server/v3
  )
  rm -rf "$scratch"
fi
fi
echo "$OSLAYER_TOOLS/bin"
