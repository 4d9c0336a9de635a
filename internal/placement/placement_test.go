package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aidonow/eva/internal/tenant"
)

func cell(name string, cpu, mem string, tenants int64, labels ...string) Cell {
	c := Cell{Name: name, Labels: map[string]string{}, Capacity: Capacity{CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem), Tenants: tenants}}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		c.Labels[k] = v
	}
	return c
}

func starter(t *testing.T) Claim {
	t.Helper()
	cat, err := tenant.LoadCatalog("")
	if err != nil {
		t.Fatal(err)
	}
	return ClaimOf(cat.Tiers["Starter"])
}

func requests(n int, claim Claim) []Request {
	out := make([]Request, n)
	for i := range out {
		out[i] = Request{Code: fmt.Sprintf("T%05d", i), Claim: claim}
	}
	return out
}

// TestPlaceSpreadsByHeadroomAndFillsUp places twenty Starter tenants (2 CPU, 4Gi each)
// on a larger and a smaller cell: each goes where the fullest dimension stays least
// full, so the larger cell takes more; once the smaller one is full every next tenant
// goes to the other; and once both are full the next is refused, naming what each cell
// lacks. Shuffling the requests changes nothing.
func TestPlaceSpreadsByHeadroomAndFillsUp(t *testing.T) {
	claim := starter(t)
	cells := []Cell{cell("eu-1", "32", "64Gi", 0), cell("eu-2", "16", "32Gi", 0)}
	res := Place(cells, requests(20, claim))
	if len(res.Problems) != 0 || len(res.Cells) != 20 {
		t.Fatalf("problems: %v, placed %d", res.Problems, len(res.Cells))
	}
	if res.Use["eu-1"].Tenants+res.Use["eu-2"].Tenants != 20 || res.Use["eu-2"].Tenants > 8 || res.Use["eu-1"].Tenants > 16 {
		t.Fatalf("use: eu-1 %+v, eu-2 %+v", res.Use["eu-1"], res.Use["eu-2"])
	}
	if l1, l2 := load(cells[0], *res.Use["eu-1"]), load(cells[1], *res.Use["eu-2"]); l1-l2 > 0.13 || l2-l1 > 0.13 {
		t.Fatalf("not spread by headroom: eu-1 at %.2f, eu-2 at %.2f", l1, l2)
	}

	shuffled := requests(20, claim)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if again := Place(cells, shuffled); !reflect.DeepEqual(again.Cells, res.Cells) {
		t.Fatal("the order of the requests changed the placement")
	}

	full := Place(cells, requests(25, claim))
	if len(full.Cells) != 24 || len(full.Problems) != 1 {
		t.Fatalf("25 tenants on room for 24: placed %d, problems %v", len(full.Cells), full.Problems)
	}
	p := full.Problems[0]
	if p.Code != "T00024" || !strings.Contains(p.Message, "eu-1 lacks cpu (34 of 32), memory (68Gi of 64Gi)") || !strings.Contains(p.Message, "eu-2 lacks cpu (18 of 16)") {
		t.Fatalf("refusal: %+v", p)
	}
}

// TestPlaceKeepsWhereItPlaced keeps every tenant on its previous cell while its
// constraint allows it, even when another cell has more room now, and reports a cell
// its kept tenants overfill (after its capacity shrank) without moving any of them. A
// tenant whose constraint changed is placed anew and listed as a move.
func TestPlaceKeepsWhereItPlaced(t *testing.T) {
	claim := starter(t)
	cells := []Cell{cell("eu-1", "8", "16Gi", 0, "region=eu"), cell("eu-2", "64", "128Gi", 0, "region=eu"), cell("us-1", "64", "128Gi", 0, "region=us")}
	reqs := requests(3, claim)
	for i := range reqs {
		reqs[i].Previous = "eu-1"
	}
	reqs[2].Labels = map[string]string{"region": "us"}
	res := Place(cells, reqs)
	want := map[string]string{"T00000": "eu-1", "T00001": "eu-1", "T00002": "us-1"}
	if !reflect.DeepEqual(res.Cells, want) || !reflect.DeepEqual(res.Moves, []string{"T00002"}) || len(res.Problems) != 0 {
		t.Fatalf("placed %v, moves %v, problems %v", res.Cells, res.Moves, res.Problems)
	}

	cells[0].Capacity.CPU = resource.MustParse("2")
	res = Place(cells, reqs)
	// T00002 counts on eu-1 too until its move to us-1 ends.
	if res.Cells["T00000"] != "eu-1" || res.Cells["T00001"] != "eu-1" || len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Message, "cell eu-1 is over capacity: cpu (6 of 2)") {
		t.Fatalf("shrunk cell: placed %v, problems %v", res.Cells, res.Problems)
	}
}

// TestPlaceRefusesWhatNoCellAllows names the constraint no cell meets.
func TestPlaceRefusesWhatNoCellAllows(t *testing.T) {
	cells := []Cell{cell("eu-1", "8", "16Gi", 0, "region=eu")}
	reqs := []Request{
		{Code: "AAAAAA", Claim: starter(t), Labels: map[string]string{"region": "ap"}},
		{Code: "BBBBBB", Claim: starter(t), Cell: "eu-9"},
	}
	res := Place(cells, reqs)
	if len(res.Problems) != 2 || res.Problems[0].Message != "no cell matches labels region=ap" || res.Problems[1].Message != `no cell matches cell "eu-9"` {
		t.Fatalf("problems: %+v", res.Problems)
	}
}

// TestClaimOf is the tier's quota where it has one, and otherwise the most its values
// may ask for.
func TestClaimOf(t *testing.T) {
	cat, err := tenant.LoadCatalog("")
	if err != nil {
		t.Fatal(err)
	}
	s := ClaimOf(cat.Tiers["Starter"])
	if s.CPU.String() != "2" || s.Memory.String() != "4Gi" || s.Pods != 20 {
		t.Fatalf("Starter: %s %s %d", s.CPU.String(), s.Memory.String(), s.Pods)
	}
	if e := ClaimOf(cat.Tiers["Enterprise"]); e.CPU.String() != "32" || e.Memory.String() != "128Gi" || e.Pods != 120 {
		t.Fatalf("Enterprise: %s %s %d", e.CPU.String(), e.Memory.String(), e.Pods)
	}
	// A tier without a quota (a catalog of the platform's own): six modules at ten
	// replicas of the largest container, 4 CPU and 16Gi.
	unbounded := cat.Tiers["Enterprise"]
	unbounded.Quota = nil
	if e := ClaimOf(unbounded); e.CPU.String() != "240" || e.Memory.String() != "960Gi" || e.Pods != 60 {
		t.Fatalf("Enterprise without a quota: %s %s %d", e.CPU.String(), e.Memory.String(), e.Pods)
	}
}

// TestMovingTenantHoldsRoomOnBothCells is the capacity attack of a requester who moves
// its tenant away and back: the room its move has not freed yet is never given to
// another tenant, whether the move is starting (the tenant placed anew, still on its
// source), under way (Holds its source) or cancelled (Holds the target until its copy
// there is gone), so neither cell ends over capacity when the tenant returns.
func TestMovingTenantHoldsRoomOnBothCells(t *testing.T) {
	claim := starter(t) // 2 CPU
	cells := []Cell{cell("a", "8", "64Gi", 0), cell("b", "8", "64Gi", 0)}
	full := func(extra ...Request) []Request {
		reqs := requests(4, claim)
		for i := range reqs {
			reqs[i].Previous = "a"
		}
		return append(reqs, extra...)
	}
	newcomer := Request{Code: "NEWONE", Claim: claim, Cell: "a"}
	for name, mover := range map[string]Request{
		"the move starts":       {Code: "T00000", Claim: claim, Cell: "b", Previous: "a"},
		"the move is under way": {Code: "T00000", Claim: claim, Cell: "b", Previous: "b", Holds: "a"},
		"the move is cancelled": {Code: "T00000", Claim: claim, Cell: "a", Previous: "a", Holds: "b"},
	} {
		t.Run(name, func(t *testing.T) {
			reqs := full(newcomer)
			reqs[0] = mover
			res := Place(cells, reqs)
			if res.Cells["NEWONE"] != "" {
				t.Errorf("the newcomer took room on a that T00000's move holds: %v", res.Cells)
			}
			for _, c := range cells {
				if lacks := lacking(c, *res.Use[c.Name]); len(lacks) > 0 {
					t.Errorf("cell %s over capacity: %v", c.Name, lacks)
				}
			}
			if u := res.Use["b"]; u.Tenants != 1 || u.CPU.String() != "2" {
				t.Errorf("b's use %+v: T00000 counts there while it moves", u)
			}
		})
	}
}
