// Package placement decides which cell (cluster) each tenant runs on: deterministically,
// by the cells' labels and capacity and the tenants' claims, keeping every tenant where
// it was placed before unless its own constraint no longer allows it. Place is pure: the
// same cells, requests and previous placements give the same answer, in evactl on a pull
// request and in the operator.
package placement

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

// Capacity is what a cell can hold: CPU and memory requests, pods and tenants, with
// the overcommit factor CPU and memory are multiplied by (1 when unset).
type Capacity struct {
	CPU        resource.Quantity `json:"cpu"`
	Memory     resource.Quantity `json:"memory"`
	Pods       int64             `json:"pods"`
	Tenants    int64             `json:"tenants"`
	Overcommit float64           `json:"overcommit,omitempty"`
}

// Cell is a cluster tenants can be placed on.
type Cell struct {
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels,omitempty"`
	Capacity Capacity          `json:"capacity"`
}

// Claim is what one tenant takes from its cell.
type Claim struct {
	CPU, Memory resource.Quantity
	Pods        int64
}

// ClaimOf is a tenant's claim: its tier's quota where the tier has one; otherwise the
// most its values may ask for (every module at the tier's largest container and replica
// count), since nothing else bounds it. Each module's seed Job adds no pod: it runs
// before the modules scale up and inside the same quota.
func ClaimOf(spec tenant.TierSpec) Claim {
	if q := spec.Quota; q != nil {
		return Claim{CPU: q.CPU.DeepCopy(), Memory: q.Memory.DeepCopy(), Pods: q.Pods}
	}
	n := int64(len(spec.Modules)) * spec.ValueLimits.MaxReplicas
	cpu, mem := spec.ValueLimits.MaxCPU.DeepCopy(), spec.ValueLimits.MaxMemory.DeepCopy()
	cpu.SetMilli(cpu.MilliValue() * n)
	mem.Set(mem.Value() * n)
	return Claim{CPU: cpu, Memory: mem, Pods: n}
}

// Request is one tenant to place.
type Request struct {
	Code  string
	Claim Claim
	// Cell, when set, is the one cell the tenant may go to; Labels, the labels its
	// cell must carry. Both unset: any cell.
	Cell   string
	Labels map[string]string
	// Previous is the cell the tenant was placed on before ("" for a new tenant); for a
	// tenant moving between cells, the cell its move takes it to.
	Previous string
	// Holds is the other cell of a move under way: the cell a tenant moves away from
	// (or, its move cancelled, the one it was moving to), which keeps its copy of the
	// tenant until the move ends. The tenant's claim counts there too.
	Holds string
}

// Allows says whether the request's constraint admits cell c.
func (r Request) Allows(c Cell) bool {
	if r.Cell != "" && r.Cell != c.Name {
		return false
	}
	for k, v := range r.Labels {
		if c.Labels[k] != v {
			return false
		}
	}
	return true
}

// Use is what a cell's tenants claim.
type Use struct {
	CPU, Memory   resource.Quantity
	Pods, Tenants int64
}

// plus is the use with one more tenant claiming c.
func (u Use) plus(c Claim) Use {
	out := Use{CPU: u.CPU.DeepCopy(), Memory: u.Memory.DeepCopy(), Pods: u.Pods + c.Pods, Tenants: u.Tenants + 1}
	out.CPU.Add(c.CPU)
	out.Memory.Add(c.Memory)
	return out
}

// Problem is a tenant Place could not place, or a cell its kept tenants overfill.
type Problem struct {
	Code, Cell, Message string
}

// Result is Place's answer.
type Result struct {
	// Cells maps each placed tenant's code to its cell.
	Cells map[string]string
	// Use is each cell's use once every placed tenant is counted.
	Use map[string]*Use
	// Moves lists the tenants whose cell changed from Previous, by code.
	Moves    []string
	Problems []Problem
}

// Place places every request. Tenants whose previous cell still satisfies their
// constraint stay there (a cell they overfill is reported, and none of them is moved
// for it). The others, in code order, go to the allowed cell with room whose fullest
// dimension after placing is least full, ties broken by name; a tenant with no allowed
// cell, or none with room, is a problem naming each candidate and what it lacks.
//
// A moving tenant claims room on both of its cells until its move ends: on the cell a
// move under way holds (Request.Holds), and on the cell a tenant placed anew leaves (its
// Previous), so no other tenant takes the room a move has not freed yet, and a move
// undone finds its room where it left it.
func Place(cells []Cell, requests []Request) Result {
	res := Result{Cells: map[string]string{}, Use: map[string]*Use{}}
	byName := map[string]Cell{}
	for _, c := range cells {
		byName[c.Name] = c
		res.Use[c.Name] = &Use{}
	}
	reqs := slices.Clone(requests)
	sort.Slice(reqs, func(i, j int) bool { return reqs[i].Code < reqs[j].Code })
	var pending []Request
	for _, r := range reqs {
		if c, ok := byName[r.Holds]; ok && r.Holds != r.Previous {
			*res.Use[c.Name] = res.Use[c.Name].plus(r.Claim)
		}
		if c, ok := byName[r.Previous]; ok && r.Allows(c) {
			res.Cells[r.Code] = c.Name
			*res.Use[c.Name] = res.Use[c.Name].plus(r.Claim)
			continue
		}
		pending = append(pending, r)
	}
	for _, r := range pending {
		// It is still there, and stays until a move takes it elsewhere and ends.
		if c, ok := byName[r.Previous]; ok && r.Holds == "" {
			*res.Use[c.Name] = res.Use[c.Name].plus(r.Claim)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(res.Use)) {
		if lacks := lacking(byName[name], *res.Use[name]); len(lacks) > 0 {
			res.Problems = append(res.Problems, Problem{Cell: name, Message: fmt.Sprintf("cell %s is over capacity: %s", name, strings.Join(lacks, ", "))})
		}
	}
	for _, r := range pending {
		best, bestLoad, why := "", 2.0, []string{}
		for _, c := range cells {
			if !r.Allows(c) {
				continue
			}
			after := res.Use[c.Name].plus(r.Claim)
			if lacks := lacking(c, after); len(lacks) > 0 {
				why = append(why, fmt.Sprintf("%s lacks %s", c.Name, strings.Join(lacks, ", ")))
				continue
			}
			if l := load(c, after); l < bestLoad || (l == bestLoad && c.Name < best) {
				best, bestLoad = c.Name, l
			}
		}
		switch {
		case best != "":
			res.Cells[r.Code] = best
			*res.Use[best] = res.Use[best].plus(r.Claim)
			if r.Previous != "" && r.Previous != best {
				res.Moves = append(res.Moves, r.Code)
			}
		case len(why) == 0:
			res.Problems = append(res.Problems, Problem{Code: r.Code, Message: "no cell matches " + r.constraint()})
		default:
			slices.Sort(why)
			res.Problems = append(res.Problems, Problem{Code: r.Code, Message: "no cell has room: " + strings.Join(why, "; ")})
		}
	}
	return res
}

// constraint describes what the request asks of a cell.
func (r Request) constraint() string {
	if r.Cell != "" {
		return fmt.Sprintf("cell %q", r.Cell)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		parts = append(parts, k+"="+r.Labels[k])
	}
	if len(parts) == 0 {
		return "any cell (there are none)"
	}
	return "labels " + strings.Join(parts, ",")
}

// Where is what the fleet records of a tenant's cells: Previous and Holds of its
// Request.
type Where func(code string) (previous, holds string)

// Requests are the placement requests of tenants, in the order given: one for each Active
// tenant whose tier the catalog has (Decommissioned tenants claim nothing, and a tier the
// catalog lacks is reported by its own check), claiming ClaimOf its tier, allowed where
// its spec.placement says, previously on the cell where(code) gives ("" for none) and
// holding the other cell of its move. evactl and the operator both build their
// requests here, so they place alike.
func Requests(tenants []*evav1.EvaTenant, catalog *tenant.Catalog, where Where) []Request {
	var reqs []Request
	for _, t := range tenants {
		if t.Spec.LifecycleOrDefault() != evav1.LifecycleActive {
			continue
		}
		spec, ok := catalog.Tiers[t.Spec.Tier]
		if !ok {
			continue
		}
		code := t.Spec.CapsuleCode
		req := Request{Code: code, Claim: ClaimOf(spec)}
		req.Previous, req.Holds = where(code)
		if p := t.Spec.Placement; p != nil {
			req.Cell, req.Labels = p.Cell, p.Labels
		}
		reqs = append(reqs, req)
	}
	return reqs
}
