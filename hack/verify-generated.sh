#!/usr/bin/env bash
# Fails when the generated files (deepcopy, CRDs, RBAC, test CRDs, the module charts'
# published digests) differ from what
# `make generate manifests` makes of the working tree as it is. The regeneration runs in
# a temporary copy, so the working tree is never touched, and uncommitted edits fail
# only when they leave generated files stale.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
: "${CONTROLLER_GEN:?CONTROLLER_GEN must name the controller-gen binary}"
generated=(api base/crd base/rbac internal/testenv/crds internal/nack internal/monitoring internal/argocd deploy/charts/eva-operator charts/published.yaml)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$tmp.diff"' EXIT
# The working tree as it is: tracked and untracked files, not ignored ones.
(cd "$root" && git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$tmp"
make -C "$tmp" --no-print-directory -s generate manifests CONTROLLER_GEN="$CONTROLLER_GEN" >/dev/null

stale=0
for dir in "${generated[@]}"; do
  if ! diff -r -u "$root/$dir" "$tmp/$dir" >"$tmp.diff" 2>&1; then
    stale=1
    head -60 "$tmp.diff"
  fi
done
rm -f "$tmp.diff"
if [ "$stale" -ne 0 ]; then
  echo "generated files are stale; run 'make generate manifests' and commit the result" >&2
  exit 1
fi
