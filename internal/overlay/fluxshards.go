package overlay

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FluxShardKey is the label Flux's controllers shard by: a controller started with
// --watch-label-selector=sharding.fluxcd.io/key=<shard> reconciles only the objects
// labelled with that shard, and the main controllers run with
// --watch-label-selector=!sharding.fluxcd.io/key.
const FluxShardKey = "sharding.fluxcd.io/key"

// FluxShards spreads the tenants' Flux objects (HelmReleases and the HelmCharts
// helm-controller makes for them, the tenant's own OCIRepositories, its Kustomizations)
// over Flux controller shards: each object carries FluxShardKey with the tenant's shard.
// One tenant's objects always share a shard, so its Kustomizations, releases and charts
// are reconciled by one set of controllers.
type FluxShards struct {
	// Shards names the shards tenants are spread over (label values such as shard1).
	// A tenant goes to the shard its capsule code ranks highest on (rendezvous
	// hashing): adding a shard moves only the tenants the new one takes, about one in
	// n+1, and removing one moves only its own.
	Shards []string `json:"shards,omitempty"`
	// Assign pins tenants by capsule code, before any other rule: a tenant that needs
	// a shard to itself, or one moved by hand. "" pins a tenant to the main controllers.
	Assign map[string]string `json:"assign,omitempty"`
	// FollowOperatorShard sends a tenant labelled eva.aidonow.com/shard to the Flux
	// shard of the same name, so that each operator shard is paired with a Flux shard
	// (its controllers must run); tenants without the label are spread over Shards.
	FollowOperatorShard bool `json:"followOperatorShard,omitempty"`
}

// ShardOf returns the Flux shard of a tenant, from its capsule code and its operator
// shard (the eva.aidonow.com/shard label, "" without one); "" is the main controllers.
// It is a pure function of the settings and the tenant: evactl and the operator agree.
func (f *FluxShards) ShardOf(code, operatorShard string) string {
	if f == nil {
		return ""
	}
	if shard, ok := f.Assign[code]; ok {
		return shard
	}
	if f.FollowOperatorShard && operatorShard != "" {
		return operatorShard
	}
	best, bestScore := "", uint64(0)
	for _, shard := range f.Shards {
		h := sha256.New()
		h.Write([]byte(code))
		h.Write([]byte{0})
		h.Write([]byte(shard))
		if score := binary.BigEndian.Uint64(h.Sum(nil)); best == "" || score > bestScore {
			best, bestScore = shard, score
		}
	}
	return best
}

// check refuses shard names that are not label values, repeated shards, and pins of
// what is not a capsule code.
func (f *FluxShards) check() error {
	if len(f.Shards) == 0 && len(f.Assign) == 0 && !f.FollowOperatorShard {
		return fmt.Errorf("fluxShards: names no shard (set shards, assign or followOperatorShard, or leave fluxShards out)")
	}
	for i, shard := range f.Shards {
		if msgs := validation.IsValidLabelValue(shard); shard == "" || len(msgs) > 0 {
			return fmt.Errorf("fluxShards.shards[%d]: %q is not a label value for %s", i, shard, FluxShardKey)
		}
		if slices.Index(f.Shards, shard) != i {
			return fmt.Errorf("fluxShards.shards[%d]: %q is listed twice", i, shard)
		}
	}
	for code, shard := range f.Assign {
		if !capsuleCodeRE.MatchString(code) {
			return fmt.Errorf("fluxShards.assign: %q is not a capsule code (six capital letters)", code)
		}
		if msgs := validation.IsValidLabelValue(shard); len(msgs) > 0 {
			return fmt.Errorf("fluxShards.assign.%s: %q is not a label value for %s: %s", code, shard, FluxShardKey, msgs[0])
		}
	}
	return nil
}
