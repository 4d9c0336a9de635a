#!/usr/bin/env bash
# `make e2e`, and the end-to-end half of `make test`: the end-to-end suite (a real
# control plane, kwok nodes, the real Flux controllers, the operator binary), together
# with an `evactl render` of the example tenants, runs under hack/egress: inside a
# network namespace with loopback only, where a packet sent anywhere else or a DNS query
# fails the run (out/egress.json says what was seen, or why the check was skipped).
# Everything is compiled before the network goes away, so a cold module cache cannot
# look like egress. Argument: the go test flags.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin="$root/bin"
flags=${1:--race -count=1 -timeout=30m -parallel=4}
# Without the race detector: the product runs here as binaries built without it (the
# operator, evactl), the test process only drives them and hosts the test's servers (git,
# OCI, JetStream, the stand-ins); under the detector that process used an eighth of
# the suite's CPU on a 2-core machine where make test is CPU-bound. The packages that run
# the product in-process (internal/controller, internal/cli, ...) keep -race.
#
# EVA_E2E_PARALLEL scenarios at a time (default 4), whatever -parallel says. Eight cut the
# suite from 697 s to 660 s beside the package tests, but once failed
# TestFluxHealthCheckFailsFast: the scenarios share kustomize-controller's four workers,
# which eight scenarios' health-checked Kustomizations keep busy for over a minute.
race_free=
for flag in $flags; do
  case "$flag" in -race | -race=* | -parallel=*) ;; *) race_free+=" $flag" ;; esac
done
flags="$race_free -parallel=${EVA_E2E_PARALLEL:-4}"
KUBEBUILDER_ASSETS="$(hack/envtest-binaries.sh "$bin")"
export KUBEBUILDER_ASSETS

go build -o "$bin/evactl" ./cmd/evactl
go build -o "$bin/egress" ./hack/egress
mkdir -p out
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# The test binaries stay in bin/ (go test leaves an up-to-date one as it is), and the run
# inside finds them built.
testbin="$bin/testbin/e2e"
mkdir -p "$testbin"
# shellcheck disable=SC2086
go test $flags -c -o "$testbin/" ./internal/testcluster/... ./internal/e2e/...
# shellcheck disable=SC2086
"$bin/egress" -report out/egress.json -- bash -c \
  '"$1" render --tenants tenants --env prod --out "$2/gitops" && go test $3 -p 1 -o "$4/" ./internal/testcluster/... ./internal/e2e/...' \
  egress-run "$bin/evactl" "$scratch" "$flags" "$testbin"
