#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver and etcd) from the Go module proxy and
# caches it under bin/k8s/<version>/. Nothing is downloaded outside the module proxy: the
# upstream release tarballs are not reachable from the build machines.
#
# Usage: hack/envtest-binaries.sh [BIN_DIR]   (prints the asset directory on stdout)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
version() { awk -v n="$1" '$1 == n { print $2 }' "$root/hack/versions.txt"; }
KUBE_VERSION="${KUBE_VERSION:-$(version kubernetes)}"
ETCD_VERSION="${ETCD_VERSION:-$(version etcd)}"
bin_dir="${1:-$root/bin}"
assets="$bin_dir/k8s/$KUBE_VERSION-etcd$ETCD_VERSION"

if [[ -x "$assets/kube-apiserver" && -x "$assets/etcd" ]]; then
  echo "$assets"
  exit 0
fi
mkdir -p "$assets"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

# shellcheck source=hack/kube-staging.sh
source "$root/hack/kube-staging.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/eva-envtest.XXXXXX")"
trap 'rm -rf "$work"' EXIT

if [[ ! -x "$assets/kube-apiserver" ]]; then
  echo "building kube-apiserver v$KUBE_VERSION from source (about 4 minutes, once per machine)" >&2
  kube_helper_module "$work/apiserver" envtest-apiserver "$KUBE_VERSION"
  (cd "$work/apiserver" &&
    go get "k8s.io/kubernetes/cmd/kube-apiserver@v$KUBE_VERSION" >&2 &&
    go build -trimpath -o "$assets/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver >&2)
  mv "$assets/kube-apiserver.tmp" "$assets/kube-apiserver"
fi

if [[ ! -x "$assets/etcd" ]]; then
  echo "building etcd v$ETCD_VERSION from source" >&2
  mkdir -p "$work/etcd"
  printf 'module eva.local/envtest-etcd\n\ngo 1.24\n' >"$work/etcd/go.mod"
  (cd "$work/etcd" &&
    go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2 &&
    go build -trimpath -o "$assets/etcd.tmp" go.etcd.io/etcd/server/v3 >&2)
  mv "$assets/etcd.tmp" "$assets/etcd"
fi

echo "$assets"
