// Package shard splits a fleet of tenants between operator processes, in the style of
// Flux's sharding: a tenant (and a rollout) belongs to the shard named by its
// eva.aidonow.com/shard label, every object rendered for it carries the same label, and
// each operator process is started with a selector over that label (--shard) that says
// which shard, or which shards, it reconciles. One process per selector leads (its
// leader election ID is derived from the selector), so every tenant is reconciled by
// exactly one leader as long as the selectors of the running shards do not overlap.
//
// Typical set-up: shards "a" and "b" run with --shard=eva.aidonow.com/shard=a and
// --shard=eva.aidonow.com/shard=b, and the main process with --shard='!eva.aidonow.com/shard'
// takes every tenant without the label.
package shard

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Label names the shard a tenant or rollout belongs to; the renderer copies it onto every
// object of the tenant, so the objects of a shard are selected by the same selector (and a
// Flux controller shard can be paired with it through its --watch-label-selector).
const Label = "eva.aidonow.com/shard"

// Selector is the parsed --shard flag. The zero value (no flag) selects every object.
type Selector struct {
	raw string
	sel labels.Selector
}

// Parse reads a --shard value: a label selector that names only the shard label
// (eva.aidonow.com/shard=a, eva.aidonow.com/shard in (a,b), !eva.aidonow.com/shard).
// A selector over another label is refused: the objects rendered for a tenant carry the
// shard label but not the tenant's other labels, so the operator could not select them.
// != and notin are refused: they select the tenants of no shard as well.
// An empty value selects everything (one process holds the whole fleet).
func Parse(value string) (Selector, error) {
	if value == "" {
		return Selector{}, nil
	}
	sel, err := labels.Parse(value)
	if err != nil {
		return Selector{}, fmt.Errorf("--shard %q: %w", value, err)
	}
	reqs, _ := sel.Requirements()
	if len(reqs) == 0 {
		return Selector{}, fmt.Errorf("--shard %q selects nothing by the %s label", value, Label)
	}
	for _, r := range reqs {
		if r.Key() != Label {
			return Selector{}, fmt.Errorf("--shard %q: the selector may name only the %s label, not %q", value, Label, r.Key())
		}
		switch r.Operator() {
		case selection.Exists, selection.DoesNotExist:
			continue
		case selection.NotEquals, selection.NotIn:
			// Those also match every tenant of no shard, which the process started with
			// !eva.aidonow.com/shard serves: two leaders for one tenant.
			return Selector{}, fmt.Errorf("--shard %q: %s also selects the tenants of no shard; name the shards (= or in), or !%s for the tenants of none", value, r.Operator(), Label)
		}
		for v := range r.Values() {
			for _, msg := range validation.IsValidLabelValue(v) {
				return Selector{}, fmt.Errorf("--shard %q: shard %q: %s", value, v, msg)
			}
		}
	}
	return Selector{raw: sel.String(), sel: sel}, nil
}

// Sharded reports whether the selector restricts the process to part of the fleet.
func (s Selector) Sharded() bool { return s.sel != nil }

// String returns the selector in its canonical form ("" when not sharded).
func (s Selector) String() string { return s.raw }

// Labels returns the selector for the cache (labels.Everything when not sharded).
func (s Selector) Labels() labels.Selector {
	if s.sel == nil {
		return labels.Everything()
	}
	return s.sel
}

// Matches reports whether an object with these labels belongs to the selected shards.
func (s Selector) Matches(objectLabels map[string]string) bool {
	return s.sel == nil || s.sel.Matches(labels.Set(objectLabels))
}

// LeaderElectionID returns the leader election ID of the processes running with this
// selector: base itself when not sharded, otherwise base with a digest of the canonical
// selector, so each shard elects its own leader and the replicas of one shard share one.
func (s Selector) LeaderElectionID(base string) string {
	if s.sel == nil {
		return base
	}
	sum := sha256.Sum256([]byte(s.raw))
	return "shard-" + hex.EncodeToString(sum[:6]) + "." + base
}

// Of returns the shard a tenant's labels name ("" for none), after checking it can be
// copied onto the tenant's rendered objects.
func Of(objectLabels map[string]string) (string, error) {
	v, ok := objectLabels[Label]
	if !ok {
		return "", nil
	}
	if v == "" {
		return "", fmt.Errorf("an empty shard name")
	}
	if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
		return "", fmt.Errorf("shard %q: %s", v, msgs[0])
	}
	return v, nil
}
