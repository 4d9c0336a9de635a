package shard_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/aidonow/eva/internal/shard"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		value   string
		matches map[string]bool // shard label value ("-" for none) → selected
		refused string
	}{
		{value: "", matches: map[string]bool{"a": true, "-": true}},
		{value: "eva.aidonow.com/shard=a", matches: map[string]bool{"a": true, "b": false, "-": false}},
		{value: "eva.aidonow.com/shard in (a, b)", matches: map[string]bool{"a": true, "b": true, "c": false, "-": false}},
		{value: "!eva.aidonow.com/shard", matches: map[string]bool{"a": false, "-": true}},
		{value: "eva.aidonow.com/shard!=a", refused: "also selects the tenants of no shard"},
		{value: "eva.aidonow.com/shard notin (a)", refused: "also selects the tenants of no shard"},
		{value: "tier=Starter", refused: `may name only the eva.aidonow.com/shard label, not "tier"`},
		{value: "eva.aidonow.com/shard=a,team=x", refused: `not "team"`},
		{value: "eva.aidonow.com/shard=(", refused: "--shard"},
		{value: "eva.aidonow.com/shard=" + strings.Repeat("x", 64), refused: "must be no more than 63"},
	} {
		sel, err := shard.Parse(tc.value)
		if tc.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("Parse(%q) = %v, want an error containing %q", tc.value, err, tc.refused)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.value, err)
		}
		if sel.Sharded() != (tc.value != "") {
			t.Errorf("Parse(%q).Sharded() = %v", tc.value, sel.Sharded())
		}
		for v, want := range tc.matches {
			l := map[string]string{"other": "x"}
			if v != "-" {
				l[shard.Label] = v
			}
			if got := sel.Matches(l); got != want {
				t.Errorf("%q matches shard %q: %v, want %v", tc.value, v, got, want)
			}
			if got := sel.Labels().Matches(labels.Set(l)); got != want {
				t.Errorf("%q: cache selector matches shard %q: %v, want %v", tc.value, v, got, want)
			}
		}
	}
}

func TestLeaderElectionID(t *testing.T) {
	const base = "eva-operator.eva.aidonow.com"
	ids := map[string]string{}
	for _, value := range []string{"", "eva.aidonow.com/shard=a", "eva.aidonow.com/shard=b", "!eva.aidonow.com/shard",
		"eva.aidonow.com/shard in (a,b)"} {
		sel, err := shard.Parse(value)
		if err != nil {
			t.Fatal(err)
		}
		id := sel.LeaderElectionID(base)
		if prev, dup := ids[id]; dup {
			t.Errorf("%q and %q share the leader election ID %s", prev, value, id)
		}
		ids[id] = value
		if msgs := validation.IsDNS1123Subdomain(id); len(msgs) > 0 {
			t.Errorf("leader election ID %q of %q is not a Lease name: %v", id, value, msgs)
		}
	}
	if ids[base] != "" {
		t.Errorf("the unsharded operator's ID is %q's", ids[base])
	}
	// One shard's replicas elect one leader, however the selector is spelled.
	x, _ := shard.Parse("eva.aidonow.com/shard in (b,a)")
	y, _ := shard.Parse("eva.aidonow.com/shard in (a, b)")
	if x.LeaderElectionID(base) != y.LeaderElectionID(base) {
		t.Errorf("two spellings of one selector elect apart: %s, %s", x.LeaderElectionID(base), y.LeaderElectionID(base))
	}
}

func TestOf(t *testing.T) {
	for l, want := range map[string]string{"a": "", "": "an empty shard name", "a b": "shard \"a b\"", "x-1.y_2": ""} {
		_, err := shard.Of(map[string]string{shard.Label: l})
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("Of(%q) = %v, want %q", l, err, want)
		}
	}
	if s, err := shard.Of(nil); s != "" || err != nil {
		t.Errorf("Of(no labels) = %q, %v", s, err)
	}
}
