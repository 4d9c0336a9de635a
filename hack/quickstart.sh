#!/usr/bin/env bash
# From a bare cluster to a provisioned tenant: apply the CRDs, deploy the operator
# overlay (unless the operator is installed with its Helm chart: make cluster,
# docs/install.md), wait for its rollout, create an EvaTenant and follow its five
# conditions until it is Active.
#
#   hack/quickstart.sh [--dry-run] [--air-gap] [--env dev] [--wave N] [--capsule-code CODE]
#                      [--tier Starter] [--kubeconfig FILE] [--timeout 600]
#
# --dry-run   server-side dry run of every change: the cluster is checked, nothing changes
# --air-gap   deploy overlays/airgap and refuse any image not from the mirror by digest
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dry_run=false air_gap=false env=dev wave=1 code=DEVUSR tier=Starter timeout=600
kubectl_args=()

die() { echo "quickstart: $*" >&2; exit 1; }
step() { echo "==> $*"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry_run=true ;;
    --air-gap) air_gap=true ;;
    --env) env="${2:?--env needs a value}"; shift ;;
    --wave) wave="${2:?--wave needs a value}"; shift ;;
    --capsule-code) code="${2:?--capsule-code needs a value}"; shift ;;
    --tier) tier="${2:?--tier needs a value}"; shift ;;
    --kubeconfig) kubectl_args+=(--kubeconfig "${2:?--kubeconfig needs a value}"); shift ;;
    --timeout) timeout="${2:?--timeout needs a value}"; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) die "unknown flag $1 (see --help)" ;;
  esac
  shift
done

[[ "$code" =~ ^[A-Z]{6}$ ]] || die "--capsule-code must be six upper-case letters, not '$code'"
[[ "$wave" =~ ^[123]$ ]] || die "--wave must be 1, 2 or 3, not '$wave'"
$air_gap && env=airgap
[[ -d "$root/overlays/$env" ]] || die "no overlay overlays/$env"
command -v kubectl >/dev/null || die "kubectl not found"

k() { kubectl "${kubectl_args[@]}" "$@"; }
apply_flags=(--server-side --field-manager=eva-quickstart)
$dry_run && apply_flags+=(--dry-run=server)

step "checking the cluster"
k get --raw=/readyz >/dev/null 2>&1 || die "cannot reach the cluster (check --kubeconfig)"
# Eva runs on Flux (helm-controller installs every module; base/ binds a Role in its
# namespace): install Flux first.
k get namespace flux-system >/dev/null 2>&1 || die "Flux is not installed: namespace flux-system not found (install Flux first: https://fluxcd.io/flux/installation/)"

# An operator installed with its Helm chart (docs/install.md, make cluster) is kept as
# it is: applying overlays/<env> over it would take its fields from Helm.
release="$(k -n eva-system get deployment eva-operator -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}' 2>/dev/null || true)"

step "rendering overlays/$env"
manifests="$(k kustomize "$root/overlays/$env")" || die "kustomize build of overlays/$env failed"
if $air_gap; then
  bad="$(grep -E '^\s*image:' <<<"$manifests" | grep -vE '@sha256:[0-9a-f]{64}' || true)"
  [[ -z "$bad" ]] || die "--air-gap: images not pinned by digest (run 'evactl images pin' and update overlays/airgap):
$bad"
  public="$(grep -E '(docker\.io|ghcr\.io|quay\.io|gcr\.io|registry\.k8s\.io)' <<<"$manifests" || true)"
  [[ -z "$public" ]] || die "--air-gap: public registry references remain:
$public"
fi

if [[ -n "$release" ]]; then
  step "the operator is installed with Helm (release $release in eva-system): keeping it, and its CRDs"
else
  step "applying the CRDs"
  k apply "${apply_flags[@]}" -f "$root/base/crd/bases/" >/dev/null || die "applying the CRDs failed"
fi

# dry_apply checks manifests with a server-side dry run. Objects that depend on others
# the dry run only pretended to create (the eva-system namespace, the EvaTenant kind) are
# reported by the server as missing; those two errors are expected, any other is fatal.
dry_apply() {
  local errors
  errors="$(k apply "${apply_flags[@]}" -f - 2>&1 >/dev/null <<<"$1" |
    grep -vE 'namespaces "eva-system" not found|no matches for kind "EvaTenant"|ensure CRDs are installed first' || true)"
  [[ -z "$errors" ]] || die "$2:
$errors"
}

if [[ -z "$release" ]]; then
  step "deploying the operator (overlays/$env)"
  if $dry_run; then
    dry_apply "$manifests" "the operator manifests were refused"
  else
    k apply "${apply_flags[@]}" -f - <<<"$manifests" >/dev/null || die "deploying the operator failed"
    step "waiting for the operator rollout"
    k -n eva-system rollout status deployment/eva-operator --timeout=300s || die "the operator did not roll out"
  fi
fi

step "creating tenant $code ($tier, wave $wave)"
tenant_name="$(tr 'A-Z' 'a-z' <<<"$code")"
tenant="apiVersion: eva.aidonow.com/v1alpha1
kind: EvaTenant
metadata:
  name: $tenant_name
  namespace: eva-system
spec:
  capsuleCode: $code
  tier: $tier
  wave: $wave"
if $dry_run; then
  dry_apply "$tenant" "the tenant was refused"
  step "dry run complete: nothing was changed"
  exit 0
fi
k apply "${apply_flags[@]}" -f - <<<"$tenant" >/dev/null || die "creating the tenant failed"

step "waiting for $code to become Active (timeout ${timeout}s)"
deadline=$((SECONDS + timeout))
while (( SECONDS < deadline )); do
  phase="$(k -n eva-system get evatenant "$tenant_name" -o jsonpath='{.status.phase}' 2>/dev/null || true)"
  conditions="$(k -n eva-system get evatenant "$tenant_name" -o jsonpath='{range .status.conditions[*]}{.type}={.status} {end}' 2>/dev/null || true)"
  echo "    phase=${phase:-Requested} $conditions"
  case "$phase" in
    Active) step "tenant $code is Active"; exit 0 ;;
    Failed) die "tenant $code failed: $(k -n eva-system get evatenant "$tenant_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')" ;;
  esac
  sleep 10
done
die "tenant $code not Active after ${timeout}s"
