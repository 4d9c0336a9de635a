#!/usr/bin/env bash
# `make test`: every test of the module. The end-to-end suite runs under hack/egress
# (hack/run-e2e.sh, as `make e2e` does); the other packages run beside it, one package
# at a time each side, as two cores allow.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
flags=${GO_TEST_FLAGS:--race -count=1 -timeout=30m -parallel=4}
KUBEBUILDER_ASSETS="$(hack/envtest-binaries.sh "$root/bin")"
export KUBEBUILDER_ASSETS

hack/run-e2e.sh "$flags" &
e2e=$!

# internal/imagebuild runs without the race detector: its long test gzips five operator
# binaries (~330 MB through compress/flate, one goroutine; the package starts none of
# its own), which the detector slows from 40 s to 3.5 minutes alone and to 7-8 minutes
# beside the end-to-end suite, a third of make test. Every other package keeps -race.
norace=./internal/imagebuild
race_free_flags=
for flag in $flags; do
  case "$flag" in -race | -race=*) ;; *) race_free_flags+=" $flag" ;; esac
done

rest=0
# shellcheck disable=SC2046,SC2086
go test $flags -p 1 $(go list ./... | grep -v -e '/internal/e2e$' -e '/internal/testcluster$' -e '/internal/imagebuild$') || rest=$?
# shellcheck disable=SC2086
go test $race_free_flags -p 1 $norace || rest=$?
e2e_status=0
wait "$e2e" || e2e_status=$?
if [ "$e2e_status" -ne 0 ]; then echo "end-to-end suite (under hack/egress): exit $e2e_status" >&2; fi
if [ "$rest" -ne 0 ]; then echo "package tests: exit $rest" >&2; fi
[ "$rest" -eq 0 ] && [ "$e2e_status" -eq 0 ]
