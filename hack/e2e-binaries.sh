#!/usr/bin/env bash
# Builds the end-to-end cluster's components from the Go module proxy and caches them
# under bin/e2e/<name>-<version>/: kube-controller-manager and kube-scheduler (the same
# Kubernetes version as envtest's kube-apiserver), kwok, Flux's source-, kustomize- and
# helm-controller, Argo CD and the helm CLI. Nothing prebuilt is downloaded. Versions:
# hack/versions.txt.
#
# Each controller is built in a helper module that requires the controller's main
# module: its go.mod `replace` directives do not apply to a dependent module, so the
# non-local ones are copied into the helper (go-digest, kustomize); local ones (./api)
# are dropped, the published api module at the required version is used instead.
#
# Usage: hack/e2e-binaries.sh [BIN_DIR]   (prints the folder holding every binary)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin_dir="${1:-$root/bin}"
version() { awk -v n="$1" '$1 == n { print $2 }' "$root/hack/versions.txt"; }
KUBE_VERSION="$(version kubernetes)"
out="$bin_dir/e2e"
mkdir -p "$out/crds"
# controller-gen generates the Flux controllers' CRDs (the Makefile installs it).
CONTROLLER_GEN="${CONTROLLER_GEN:?set CONTROLLER_GEN to the controller-gen binary (make e2e-binaries does)}"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
# Two modules Flux depends on have no checksum-database entry.
export GONOSUMDB="${GONOSUMDB:+$GONOSUMDB,}github.com/fluxcd/pkg/http/transport,github.com/google/go-containerregistry/pkg/authn/k8schain"

work="$(mktemp -d "${TMPDIR:-/tmp}/eva-e2e.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# build NAME MODULE VERSION PACKAGE [copy|replaces]: copy also takes the module's replace
# directives and generates its CRDs; replaces takes the replace directives only.
build() {
  local name="$1" module="$2" ver="$3" pkg="$4" copy="${5:-}"
  local dest="$out/$name-$ver"
  if [[ -x "$dest" && ( "$copy" != copy || -d "$out/crds/$name-$ver" ) ]]; then return; fi
  echo "building $name $ver from the module proxy" >&2
  local dir="$work/$name"
  mkdir -p "$dir"
  printf 'module eva.local/e2e-%s\n\ngo 1.25\n' "$name" >"$dir/go.mod"
  (
    cd "$dir"
    if [[ -n "$copy" ]]; then
      go mod download "$module@$ver" >&2
      local modfile
      modfile="$(go env GOMODCACHE)/cache/download/$module/@v/$ver.mod"
      go mod edit -json "$modfile" | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    new = r["New"]
    if not new.get("Version"):
        continue  # a local folder (./api): the published module is used instead
    old = r["Old"]["Path"] + ("@" + r["Old"]["Version"] if r["Old"].get("Version") else "")
    print("-replace=%s=%s@%s" % (old, new["Path"], new["Version"]))
' | xargs -r go mod edit
    fi
    go get "$module@$ver" >&2
    go build -trimpath -o "$dest.tmp" "$pkg" >&2
    if [[ "$copy" == copy ]]; then
      # The controller's CRDs, generated from the API module version it was built
      # against (not the newer one Eva's go.mod uses), exactly as upstream generates them.
      "$CONTROLLER_GEN" crd paths="$module/api/..." output:crd:dir="$out/crds/$name-$ver.tmp" >&2
      rm -rf "$out/crds/$name-$ver" && mv "$out/crds/$name-$ver.tmp" "$out/crds/$name-$ver"
    fi
  )
  mv "$dest.tmp" "$dest"
}

# kube-controller-manager and kube-scheduler, built like envtest's kube-apiserver.
build_kube() {
  local name="$1"
  local dest="$out/$name-$KUBE_VERSION"
  if [[ -x "$dest" ]]; then return; fi
  echo "building $name v$KUBE_VERSION from source" >&2
  local dir="$work/$name"
  kube_helper_module "$dir" "e2e-$name" "$KUBE_VERSION"
  (cd "$dir" &&
    go get "k8s.io/kubernetes/cmd/$name@v$KUBE_VERSION" >&2 &&
    go build -trimpath -o "$dest.tmp" "k8s.io/kubernetes/cmd/$name" >&2)
  mv "$dest.tmp" "$dest"
}
# shellcheck source=hack/kube-staging.sh
source "$root/hack/kube-staging.sh"

build_kube kube-controller-manager
build_kube kube-scheduler
build kwok sigs.k8s.io/kwok "v$(version kwok)" sigs.k8s.io/kwok/cmd/kwok
build source-controller github.com/fluxcd/source-controller "v$(version source-controller)" github.com/fluxcd/source-controller copy
build kustomize-controller github.com/fluxcd/kustomize-controller "v$(version kustomize-controller)" github.com/fluxcd/kustomize-controller copy
build helm-controller github.com/fluxcd/helm-controller "v$(version helm-controller)" github.com/fluxcd/helm-controller copy
# The sops CLI as the kustomize-controller above links it (the same module graph, so the
# build cache already holds nearly all of it): the tests encrypt tenant Secrets with the
# tool users run, and kustomize-controller decrypts them.
build sops github.com/fluxcd/kustomize-controller "v$(version kustomize-controller)" github.com/getsops/sops/v3/cmd/sops replaces

# Argo CD (one binary, run as the application controller and the repo server), built
# like the Flux controllers from its main module with its replace directives, and the
# helm CLI its repo server runs for Helm sources: Eva's own Helm version, so the build
# cache already holds nearly all of it.
build argocd github.com/argoproj/argo-cd/v3 "v$(version argo-cd)" github.com/argoproj/argo-cd/v3/cmd replaces
build helm helm.sh/helm/v3 "$(cd "$root" && go list -m -f '{{.Version}}' helm.sh/helm/v3)" helm.sh/helm/v3/cmd/helm

echo "$out"
