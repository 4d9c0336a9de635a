#!/usr/bin/env bash
# `make test`: every test of the module. The end-to-end suite (a real control plane,
# kwok nodes, the real Flux controllers, the operator binary), together with an
# `evactl render` of the example tenants, runs under hack/egress: inside a network
# namespace with loopback only, where a packet sent anywhere else or a DNS query fails
# the run (out/egress.json says what was seen, or why the check was skipped). The other
# packages run beside it, one package at a time each side, as two cores allow.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin="$root/bin"
flags=${GO_TEST_FLAGS:--race -count=1 -timeout=30m -parallel=4}
KUBEBUILDER_ASSETS="$(hack/envtest-binaries.sh "$bin")"
export KUBEBUILDER_ASSETS

go build -o "$bin/evactl" ./cmd/evactl
go build -o "$bin/egress" ./hack/egress
# Compile the end-to-end tests before the network goes away (the module cache serves
# them offline anyway; this keeps a cold cache from looking like egress).
mkdir -p out
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# shellcheck disable=SC2086
go test $flags -c -o "$scratch/" ./internal/testcluster/... ./internal/e2e/...
render="$scratch"
# shellcheck disable=SC2086
"$bin/egress" -report out/egress.json -- bash -c \
  '"$1" render --tenants tenants --env prod --out "$2/gitops" && go test $3 -p 1 ./internal/testcluster/... ./internal/e2e/...' \
  egress-run "$bin/evactl" "$render" "$flags" &
e2e=$!

rest=0
# shellcheck disable=SC2046,SC2086
go test $flags -p 1 $(go list ./... | grep -v -e '/internal/e2e$' -e '/internal/testcluster$') || rest=$?
e2e_status=0
wait "$e2e" || e2e_status=$?
if [ "$e2e_status" -ne 0 ]; then echo "end-to-end suite (under hack/egress): exit $e2e_status" >&2; fi
if [ "$rest" -ne 0 ]; then echo "package tests: exit $rest" >&2; fi
[ "$rest" -eq 0 ] && [ "$e2e_status" -eq 0 ]
