package main

import (
	"fmt"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/api/resource"
)

// defaultGCPercent is the garbage collector's target when GOGC is not set: a new cycle
// when the heap has grown by half of what the last one kept, instead of Go's default of
// all of it. The operator's live heap is mostly its informer caches, which grow with the
// fleet; the default doubled that in resident memory. Measured with one operator process
// over 1,000 tenants (a throwaway variant of BenchmarkOperatorProcess, the same run for
// both): peak RSS 156.4 MiB at GOGC=100 and 137.5 MiB at 50, with the process's CPU time
// 30.1 s and 29.8 s (the API server, not the operator, is what a fleet waits for).
const defaultGCPercent = 50

// setGCPercent sets the garbage collector's target to defaultGCPercent unless GOGC is
// set in the environment (getenv), which then decides as Go reads it.
func setGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// containerMemoryLimit names the environment variable the chart sets to the container's
// memory limit (a resourceFieldRef of limits.memory: bytes).
const containerMemoryLimit = "CONTAINER_MEMORY_LIMIT"

// softLimitShare is the part of the container's memory limit the Go runtime's soft
// memory limit is set to. The rest is for what the runtime does not count and the kernel
// does: the binary's mapped code (about 60 MiB resident at a large fleet) and buffers.
// At 90%, one process holding 10,000 tenants in a 600Mi container went about 10 MiB
// over its limit (BenchmarkOperatorProcess, EVA_BENCH_FLEETS=10000@600Mi).
const softLimitShare = 0.85

// setMemoryLimit sets the Go runtime's soft memory limit to softLimitShare of the
// container's memory limit (containerMemoryLimit in the environment, getenv), so the
// garbage collector works harder as the process nears its limit instead of letting it be
// killed for going over. GOMEMLIMIT, when set, decides instead (as Go reads it). It
// returns the limit it set, 0 when it set none.
func setMemoryLimit(getenv func(string) string) (int64, error) {
	value := getenv(containerMemoryLimit)
	if value == "" || getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(value)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("%s=%q: not a memory size (bytes, or a quantity such as 600Mi)", containerMemoryLimit, value)
	}
	limit := int64(float64(q.Value()) * softLimitShare)
	debug.SetMemoryLimit(limit)
	return limit, nil
}
