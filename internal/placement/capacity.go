package placement

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// limits are a cell's capacity with overcommit applied, in milli-CPU and bytes.
func limits(c Cell) (cpuMilli, memBytes float64) {
	over := c.Capacity.Overcommit
	if over <= 0 {
		over = 1
	}
	return float64(c.Capacity.CPU.MilliValue()) * over, float64(c.Capacity.Memory.Value()) * over
}

// lacking lists each dimension in which use u passes cell c's capacity, with the
// figures. An unset (zero) pods or tenants capacity is no bound; CPU and memory must be
// set for a cell to hold anything.
func lacking(c Cell, u Use) []string {
	cpu, mem := limits(c)
	var out []string
	if need := float64(u.CPU.MilliValue()); need > cpu {
		out = append(out, fmt.Sprintf("cpu (%s of %s)", milliString(need), milliString(cpu)))
	}
	if need := float64(u.Memory.Value()); need > mem {
		out = append(out, fmt.Sprintf("memory (%s of %s)", bytesString(need), bytesString(mem)))
	}
	if c.Capacity.Pods > 0 && u.Pods > c.Capacity.Pods {
		out = append(out, fmt.Sprintf("pods (%d of %d)", u.Pods, c.Capacity.Pods))
	}
	if c.Capacity.Tenants > 0 && u.Tenants > c.Capacity.Tenants {
		out = append(out, fmt.Sprintf("tenants (%d of %d)", u.Tenants, c.Capacity.Tenants))
	}
	return out
}

// load is the fullest dimension of cell c under use u, as a fraction of its capacity.
func load(c Cell, u Use) float64 {
	cpu, mem := limits(c)
	l := max(float64(u.CPU.MilliValue())/cpu, float64(u.Memory.Value())/mem)
	if c.Capacity.Pods > 0 {
		l = max(l, float64(u.Pods)/float64(c.Capacity.Pods))
	}
	if c.Capacity.Tenants > 0 {
		l = max(l, float64(u.Tenants)/float64(c.Capacity.Tenants))
	}
	return l
}

// Headroom is what a cell can still take: capacity (with overcommit) less use.
func Headroom(c Cell, u Use) (cpu, memory resource.Quantity, pods, tenants int64) {
	cpuMilli, memBytes := limits(c)
	cpu = *resource.NewMilliQuantity(int64(cpuMilli)-u.CPU.MilliValue(), resource.DecimalSI)
	memory = *resource.NewQuantity(int64(memBytes)-u.Memory.Value(), resource.BinarySI)
	if c.Capacity.Pods > 0 {
		pods = c.Capacity.Pods - u.Pods
	}
	if c.Capacity.Tenants > 0 {
		tenants = c.Capacity.Tenants - u.Tenants
	}
	return cpu, memory, pods, tenants
}

func milliString(m float64) string {
	return resource.NewMilliQuantity(int64(m), resource.DecimalSI).String()
}

func bytesString(b float64) string {
	return resource.NewQuantity(int64(b), resource.BinarySI).String()
}
