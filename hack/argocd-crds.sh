#!/usr/bin/env bash
# Copies Argo CD's own Application and AppProject CRDs, as published in the argo-cd Go
# module at the version hack/versions.txt names, into OUT_DIR (make manifests writes them
# to internal/testenv/crds/argocd, where the render tests check every rendered Argo CD
# object against them). Eva does not import argo-cd: the module only provides the files.
#
# Usage: hack/argocd-crds.sh OUT_DIR
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: hack/argocd-crds.sh OUT_DIR}"
ver="v$(awk '$1 == "argo-cd" { print $2 }' "$root/hack/versions.txt")"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
dir="$(cd "$(mktemp -d)" && go mod download -json "github.com/argoproj/argo-cd/v3@$ver" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
mkdir -p "$out"
for crd in application appproject; do
  { echo "# Argo CD $ver manifests/crds/$crd-crd.yaml, copied by hack/argocd-crds.sh."
    cat "$dir/manifests/crds/$crd-crd.yaml"; } >"$out/$crd-crd.yaml"
done
