#!/usr/bin/env bash
# `make test`: every test of the module. The end-to-end suite runs under hack/egress
# (hack/run-e2e.sh, as `make e2e` does); the other packages run beside it, two at a
# time: most of their time is spent waiting on an API server, and the end-to-end suite
# is the longer half.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
flags=${GO_TEST_FLAGS:--race -count=1 -timeout=30m -parallel=4}
KUBEBUILDER_ASSETS="$(hack/envtest-binaries.sh "$root/bin")"
export KUBEBUILDER_ASSETS

# Every package's result line is kept for the timing report at the end.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
{
  status=0
  hack/run-e2e.sh "$flags" 2>&1 || status=$?
  echo "$status" >"$logs/e2e.status"
} | tee "$logs/e2e.log" &
e2e=$!

rest=0
# The test binaries stay in bin/: go test leaves an up-to-date one as it is, so a warm
# run links nothing (linking them was a fifth of this side's time).
mkdir -p "$root/bin/testbin/packages"
# Only packages with tests: two packages of one name (api/v1alpha1 and the Argo CD types)
# would want one binary name, and the other packages have nothing to run.
# shellcheck disable=SC2046,SC2086
go test $flags -p 2 -o "$root/bin/testbin/packages/" $(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./... |
  grep -v -e '/internal/e2e$' -e '/internal/testcluster$') 2>&1 |
  tee "$logs/packages.log" || rest=$?
wait "$e2e" || true
e2e_status=$(cat "$logs/e2e.status" 2>/dev/null || echo 1)

# Where the time went: each package's own test time, slowest first (the two halves run
# side by side, so the wall time is about the larger of the end-to-end suite and the sum
# of the rest).
echo
echo "Test time per package (s), slowest first:"
grep -hE '^(ok|FAIL)[[:space:]]+[^[:space:]]+[[:space:]]+[0-9.]+s' "$logs/packages.log" "$logs/e2e.log" |
  awk '{sub(/s$/, "", $3); printf "%9.1f  %-4s %s\n", $3, $1, $2}' | sort -rn || true
if [ "$e2e_status" -ne 0 ]; then echo "end-to-end suite (under hack/egress): exit $e2e_status" >&2; fi
if [ "$rest" -ne 0 ]; then echo "package tests: exit $rest" >&2; fi
[ "$rest" -eq 0 ] && [ "$e2e_status" -eq 0 ]
